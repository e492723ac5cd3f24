"""esra-starlette: the example host and the ``esra`` command line.

The names in ``__all__`` are what a platform team embedding the host builds on: the MCP app
(``create_app``) over the host's parts, the configured and the embedded way to open those
parts, the TOML settings, the token verification, and the server ``esra serve`` runs.
Everything else under ``esra.starlette`` is implementation and may move between releases.
Names are imported when first used, so the ``esra`` commands load only what they run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from esra.core.lazy_surface import lazy_attributes

__version__ = "0.1.0"

if TYPE_CHECKING:
    from esra.starlette.app import create_app
    from esra.starlette.auth import AuthenticatedCaller, JwtVerifier
    from esra.starlette.host import HostParts, build_app
    from esra.starlette.issuers import TrustedIssuer
    from esra.starlette.parts import open_configured, open_embedded
    from esra.starlette.serve import HostServer
    from esra.starlette.settings import HostSettings, SettingsError, load_settings, parse_settings

# Each public name, and the module that defines it.
_PUBLIC: dict[str, str] = {
    "create_app": "esra.starlette.app",
    **dict.fromkeys(["AuthenticatedCaller", "JwtVerifier"], "esra.starlette.auth"),
    **dict.fromkeys(["HostParts", "build_app"], "esra.starlette.host"),
    "TrustedIssuer": "esra.starlette.issuers",
    **dict.fromkeys(["open_configured", "open_embedded"], "esra.starlette.parts"),
    "HostServer": "esra.starlette.serve",
    **dict.fromkeys(
        ["HostSettings", "SettingsError", "load_settings", "parse_settings"],
        "esra.starlette.settings",
    ),
}

__all__ = [
    "AuthenticatedCaller",
    "HostParts",
    "HostServer",
    "HostSettings",
    "JwtVerifier",
    "SettingsError",
    "TrustedIssuer",
    "__version__",
    "build_app",
    "create_app",
    "load_settings",
    "open_configured",
    "open_embedded",
    "parse_settings",
]

# Hidden from type checkers (see ``lazy_attributes``).
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_attributes(__name__, _PUBLIC, globals())
