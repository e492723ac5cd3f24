"""A TCP proxy that forwards a server's first connections and holds the next one unanswered.

``StallingProxy(upstream, forward=n)`` listens on a free loopback port: connections 1..n are
piped to ``upstream`` both ways; connection n + 1 is accepted and never answered, so its
client sits in the middle of connecting for as long as the test likes. ``stalled`` is set the
moment it arrives, which tells a test exactly where a process under test is — waiting on its
(n + 1)-th connection — without sleeping and hoping. Later connections are closed at once.
Threads, not an event loop: the process under test is a separate process, and the proxy
must keep piping while the test blocks on it.
"""

from __future__ import annotations

import contextlib
import socket
import threading

from tests._loopback_proxy import LoopbackProxy

__all__ = ["StallingProxy"]

_CHUNK = 65536


class StallingProxy(LoopbackProxy):
    """Forward the first ``forward`` connections to ``upstream``; hold the next one."""

    def __init__(self, upstream: tuple[str, int], *, forward: int) -> None:
        super().__init__(upstream)
        self.stalled = threading.Event()
        self._forward = forward

    def _accept(self) -> None:
        accepted = 0
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # the listener was closed: the proxy is done
                return
            accepted += 1
            if not self._keep(client):
                return
            if accepted <= self._forward:
                self._pipe(client)
            elif accepted == self._forward + 1:
                self.stalled.set()  # held open, never read from or answered
            else:
                client.close()

    def _pipe(self, client: socket.socket) -> None:
        upstream = socket.create_connection(self._upstream, timeout=10)
        upstream.settimeout(None)
        if not self._keep(upstream):
            return
        for source, sink in ((client, upstream), (upstream, client)):
            threading.Thread(target=_copy, args=(source, sink), daemon=True).start()


def _copy(source: socket.socket, sink: socket.socket) -> None:
    """Copy bytes one way until either end closes, then close the other way too."""
    with contextlib.suppress(OSError):
        while chunk := source.recv(_CHUNK):
            sink.sendall(chunk)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)
