"""The Host-header check for every route of the host, not only ``/mcp``.

DNS rebinding lets a web page reach a server on the visitor's loopback or intranet under a
name the attacker controls; the only trace is the ``Host`` header. The MCP SDK refuses a
foreign ``Host`` on ``/mcp``; this middleware applies the same allowed hosts, with the same
matching (``host:port`` exactly, or ``host:*`` for any port), to the admin API, the portal
and the metadata, answering a foreign ``Host`` as the SDK does (421). ``/healthz`` and
``/readyz`` are left open so probes that address the instance by IP keep working: they
answer nothing but "ok", or the names and states of the host's own checks.
"""

from __future__ import annotations

import logging
from collections.abc import Collection

from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["HostHeaderCheck", "host_allowed"]

_log = logging.getLogger(__name__)


def host_allowed(host: str | None, allowed_hosts: Collection[str]) -> bool:
    """Whether ``host`` matches an entry of ``allowed_hosts`` (``name:port`` or ``name:*``)."""
    if not host:
        return False
    if host in allowed_hosts:
        return True
    # "name:*" matches "name:" followed by any port, as the MCP SDK matches it.
    return any(
        allowed.endswith(":*") and host.startswith(allowed[:-1]) for allowed in allowed_hosts
    )


class HostHeaderCheck:
    """ASGI middleware answering 421 to an HTTP request whose ``Host`` is not allowed."""

    def __init__(
        self, app: ASGIApp, *, allowed_hosts: Collection[str], open_paths: Collection[str] = ()
    ) -> None:
        self._app = app
        self._allowed = frozenset(allowed_hosts)
        self._open_paths = frozenset(open_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") in self._open_paths:
            await self._app(scope, receive, send)
            return
        host = Headers(scope=scope).get("host")
        if not host_allowed(host, self._allowed):
            # The value is the caller's; %r keeps control characters out of the log line.
            _log.warning("refused a request for Host %r", (host or "")[:100])
            response = Response("Invalid Host header", status_code=421)
            await response(scope, receive, send)
            return
        await self._app(scope, receive, send)
