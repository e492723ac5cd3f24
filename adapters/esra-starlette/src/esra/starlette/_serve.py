"""HostServer: the composed host under uvicorn, as ``esra serve`` runs it.

It opens the host's parts (embedded default or TOML settings), serves until stopped, and
closes the parts again. ``stop()`` may be called from any thread, so a test can run the
server in a background thread and end it cleanly.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import uvicorn
from starlette.types import ASGIApp

from esra.core import SystemClock
from esra.starlette import _heap
from esra.starlette._host import HostParts, build_app, default_resource_url
from esra.starlette._log_redaction import uvicorn_log_config
from esra.starlette._stores import open_tenant_stores
from esra.starlette._telemetry_export import TelemetrySettings, exporting

__all__ = ["AnnouncingServer", "HostServer", "free_port"]


class HostServer:
    """Serves the host built from ``open_parts`` on ``host``:``port`` until stopped.

    Args:
        open_parts: opens the parts (``open_embedded(...)`` or ``open_configured(...)``).
        host: the address to listen on.
        port: the TCP port to listen on.
        log_level: uvicorn's log level.
        resource_url: the endpoint's public URL, when configured (shown to the operator).
        wrap: wraps the built app (``esra serve --insecure-dev-anonymous``); none by default.
        settle_heap: once listening, freeze the start-up heap and raise the garbage
            collector's young threshold (see ``esra.starlette._heap``): for a process that
            serves and nothing else, as ``esra serve`` does; off by default, since it changes
            the whole interpreter's settings.
    """

    def __init__(
        self,
        open_parts: Callable[[], AbstractAsyncContextManager[HostParts]],
        *,
        host: str = "127.0.0.1",
        port: int = 8000,
        log_level: str = "info",
        resource_url: str | None = None,
        wrap: Callable[[ASGIApp], ASGIApp] | None = None,
        telemetry: TelemetrySettings | None = None,
        settle_heap: bool = False,
    ) -> None:
        self._open_parts = open_parts
        self._settle_heap = settle_heap
        self._telemetry = telemetry
        self.host = host
        self.port = port
        self._log_level = log_level
        self._wrap = wrap
        self._server: uvicorn.Server | None = None
        self._stop_requested = threading.Event()
        self.started = threading.Event()
        self.resource_url = resource_url or default_resource_url(host, port)

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        """Open the parts, serve until ``stop()``, then close the parts.

        With ``telemetry`` the OpenTelemetry SDK exports while serving, and is flushed and
        shut down after the parts close. With ``sockets`` uvicorn accepts on those
        (listening already, as ``esra serve --workers`` hands them to each worker) instead of
        binding ``host``:``port`` itself.
        """
        with exporting(self._telemetry):
            await self._serve(sockets)

    async def _serve(self, sockets: list[socket.socket] | None) -> None:
        async with (
            self._open_parts() as parts,
            open_tenant_stores(
                parts.stores,
                audit=parts.audit,
                clock=SystemClock(),
                defaults=parts.store_defaults,
                shared=parts.store_states,
                cache=parts.cache,
                audit_forward_s=parts.audit_forward_s,
            ) as stores,
        ):
            app: ASGIApp = build_app(parts, host=self.host, port=self.port, stores=stores)
            if self._wrap is not None:
                app = self._wrap(app)
            config = uvicorn.Config(
                app,
                host=self.host,
                port=self.port,
                log_level=self._log_level,
                lifespan="on",
                ws="none",  # MCP's streamable HTTP needs no WebSocket
                # The access log names every request target: credentials in a query string
                # (a refused ?access_token=, say) are redacted before the line is written.
                log_config=uvicorn_log_config(),
            )
            server = AnnouncingServer(
                config, self.started, on_started=_heap.settle_heap if self._settle_heap else None
            )
            self._server = server
            if self._stop_requested.is_set():
                return
            try:
                await server.serve(sockets=sockets)
            finally:
                self._server = None

    def stop(self) -> None:
        """Ask the server to finish its requests and exit (safe from any thread)."""
        self._stop_requested.set()
        if self._server is not None:
            self._server.should_exit = True


class AnnouncingServer(uvicorn.Server):
    """uvicorn's server, announcing through an event once it listens."""

    def __init__(
        self,
        config: uvicorn.Config,
        started: threading.Event,
        *,
        on_started: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(config)
        self._started_event = started
        self._on_started = on_started

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            if self._on_started is not None:
                self._on_started()
            self._started_event.set()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now (for tests and benchmarks that start a server)."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port
