"""Where the portal lives: every link and cookie is relative to the path it is mounted at.

The host mounts the portal (``/portal`` by default) and may itself sit under a proxy prefix;
Starlette hands the mounted app that prefix as ``root_path``, so links are built from it
rather than hard-coded, and a ``next`` target after sign-in is accepted only inside it.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.requests import Request

__all__ = ["base_path", "local_next", "portal_url"]


def base_path(request: Request) -> str:
    """The portal's mount path, without a trailing slash ("" when served at the root)."""
    root: str = request.scope.get("root_path", "")
    return root.rstrip("/")


def portal_url(request: Request, path: str) -> str:
    """The URL path of ``path`` (starting with ``/``) inside the portal."""
    return base_path(request) + path


def local_next(request: Request, target: str | None) -> str | None:
    """``target`` if it is a path inside the portal, else ``None``.

    Guards the sign-in redirect: an absolute URL, a scheme-relative ``//host`` or a
    backslash trick would otherwise send a freshly signed-in operator to another site.
    """
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return None
    parts = urlsplit(target)
    if parts.scheme or parts.netloc:
        return None
    base = base_path(request)
    if base and parts.path != base and not parts.path.startswith(base + "/"):
        return None
    return target
