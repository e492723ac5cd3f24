"""esra-starlette: the example host and the ``esra`` command line.

The names in ``__all__`` are what a platform team embedding the host builds on: the MCP app
(``create_app``) over the host's parts, the configured and the embedded way to open those
parts, the TOML settings, the token verification, and the server ``esra serve`` runs.
Everything else under ``esra.starlette`` is implementation and may move between releases.
Names are imported when first used, so the ``esra`` commands load only what they run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from esra.core import lazy_attributes

__version__ = "0.1.0"

if TYPE_CHECKING:
    from esra.starlette._admin.limits import AdminLimits
    from esra.starlette._app import create_app
    from esra.starlette._auth import AuthenticatedCaller, JwtVerifier
    from esra.starlette._host import HostParts, build_app
    from esra.starlette._issuers import SigningKey, TrustedIssuer
    from esra.starlette._parts import open_configured, open_embedded
    from esra.starlette._serve import HostServer
    from esra.starlette._settings import (
        HostSettings,
        ModelSettings,
        ServerSettings,
        SettingsError,
        StateSettings,
        TenantSettings,
        load_settings,
        parse_settings,
    )
    from esra.starlette._shared_state import RedisSettings
    from esra.starlette._stores import TenantStore
    from esra.starlette._telemetry_export import TelemetrySettings

# Each public name, and the module that defines it.
_PUBLIC: dict[str, str] = {
    "create_app": "esra.starlette._app",
    **dict.fromkeys(["AuthenticatedCaller", "JwtVerifier"], "esra.starlette._auth"),
    **dict.fromkeys(["HostParts", "build_app"], "esra.starlette._host"),
    "TrustedIssuer": "esra.starlette._issuers",
    **dict.fromkeys(["open_configured", "open_embedded"], "esra.starlette._parts"),
    "HostServer": "esra.starlette._serve",
    **dict.fromkeys(
        ["HostSettings", "SettingsError", "load_settings", "parse_settings"],
        "esra.starlette._settings",
    ),
    "AdminLimits": "esra.starlette._admin.limits",
    "SigningKey": "esra.starlette._issuers",
    "ModelSettings": "esra.starlette._settings",
    "ServerSettings": "esra.starlette._settings",
    "StateSettings": "esra.starlette._settings",
    "TenantSettings": "esra.starlette._settings",
    "RedisSettings": "esra.starlette._shared_state",
    "TenantStore": "esra.starlette._stores",
    "TelemetrySettings": "esra.starlette._telemetry_export",
}

__all__ = [
    "AdminLimits",
    "AuthenticatedCaller",
    "HostParts",
    "HostServer",
    "HostSettings",
    "JwtVerifier",
    "ModelSettings",
    "RedisSettings",
    "ServerSettings",
    "SettingsError",
    "SigningKey",
    "StateSettings",
    "TelemetrySettings",
    "TenantSettings",
    "TenantStore",
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
