"""Where the portal lives: every link and cookie is relative to the path it is mounted at.

The host mounts the portal (``/portal`` by default) and may itself sit under a proxy prefix;
Starlette hands the mounted app that prefix as ``root_path``, so links are built from it
rather than hard-coded, and a ``next`` target after sign-in is accepted only inside it.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from starlette.requests import Request

__all__ = ["MAX_NEXT_CHARS", "base_path", "local_next", "portal_url"]

# A sign-in target is a page of the portal with its query; nothing legitimate is longer.
MAX_NEXT_CHARS = 2048
# "%" not starting a two-digit escape: decoders disagree on it, so it is refused.
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
# Escapes of ".", "/", "\\" and of control characters (C0, DEL).
_ENCODED_UNSAFE = re.compile(r"%(?:2[eEfF]|5[cC]|[01][0-9A-Fa-f]|7[fF])")
_DOT_SEGMENTS = frozenset({".", ".."})


def base_path(request: Request) -> str:
    """The portal's mount path, without a trailing slash ("" when served at the root)."""
    root: str = request.scope.get("root_path", "")
    return root.rstrip("/")


def portal_url(request: Request, path: str) -> str:
    """The URL path of ``path`` (starting with ``/``) inside the portal."""
    return base_path(request) + path


def local_next(request: Request, target: str | None) -> str | None:
    """``target`` if it is a normalised path inside the portal (with any query), else ``None``.

    Guards the sign-in redirect. A browser resolves the ``Location`` it is sent, so anything
    it would resolve differently from how it reads is refused rather than repaired: an
    absolute URL, a scheme-relative ``//host``, a backslash (read as ``/`` by browsers),
    whitespace or control characters, empty or dot segments (``/portal/../admin``), and
    percent-encoded ``.``, ``/``, ``\\`` or control characters (``%2e%2e``, ``%2f``), which
    browsers and proxies may decode before resolving.
    """
    if not target or len(target) > MAX_NEXT_CHARS or not target.startswith("/"):
        return None
    if "\\" in target or any(ch.isspace() or not ch.isprintable() for ch in target):
        return None
    parts = urlsplit(target)
    if parts.scheme or parts.netloc:
        return None
    path = parts.path
    if _ENCODED_UNSAFE.search(path) or _BAD_ESCAPE.search(path):
        return None
    segments = path.split("/")[1:]
    # An empty segment is "//" somewhere (or the trailing "/" of the last one, which is fine).
    if any(segment in _DOT_SEGMENTS for segment in segments) or "" in segments[:-1]:
        return None
    base = base_path(request)
    if base and path != base and not path.startswith(base + "/"):
        return None
    return target
