"""A TCP proxy that loses one message, and its connection with it.

``CuttingProxy(upstream, cut_at=(b"INSERT 0 ",))`` listens on a free loopback port and pipes
every connection to ``upstream`` both ways, until the server first sends bytes holding the
first of ``cut_at`` (with ``in_requests=True``: until the client does). Those are never
forwarded, and that connection is closed both ways; then the same for the next of
``cut_at``, on whichever connection it comes. A lost reply means the server has done the work (a
PostgreSQL autocommit statement is committed before its ``CommandComplete`` and
``ReadyForQuery`` are flushed together); a lost request, that it never saw it. Either way
the client only sees its connection lost, and cannot tell which. Later connections are piped
whole; ``cut`` is set once every message of ``cut_at`` is lost.
"""

from __future__ import annotations

import socket
import threading

from tests._loopback_proxy import LoopbackProxy, close_both_ways

__all__ = ["CuttingProxy"]

_CHUNK = 65536


class CuttingProxy(LoopbackProxy):
    """Pipe connections to ``upstream``; lose the replies (or requests) holding ``cut_at``,
    the first of each in turn."""

    def __init__(
        self, upstream: tuple[str, int], *, cut_at: tuple[bytes, ...], in_requests: bool = False
    ) -> None:
        super().__init__(upstream)
        self.cut = threading.Event()
        self._cuts = list(cut_at)
        self._in_requests = in_requests

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if not self._keep(client):
                return
            try:
                server = socket.create_connection(self._upstream)
            except OSError:
                close_both_ways(client)
                continue
            if not self._keep(server):
                close_both_ways(client)
                return
            requests = (client, server, self._in_requests)
            replies = (server, client, not self._in_requests)
            threading.Thread(target=self._pipe, args=requests, daemon=True).start()
            threading.Thread(target=self._pipe, args=replies, daemon=True).start()

    def _pipe(self, source: socket.socket, target: socket.socket, cutting: bool) -> None:
        try:
            while chunk := source.recv(_CHUNK):
                if cutting and self._take_the_cut(chunk):
                    close_both_ways(source)
                    close_both_ways(target)
                    return
                target.sendall(chunk)
        except OSError:
            pass
        close_both_ways(target)

    def _take_the_cut(self, chunk: bytes) -> bool:
        """Whether ``chunk`` holds the next message to lose (which is then the one after)."""
        with self._lock:
            if not self._cuts or self._cuts[0] not in chunk:
                return False
            self._cuts.pop(0)
            if not self._cuts:
                self.cut.set()
            return True
