"""What the tests' TCP proxies share: a loopback listener, the sockets to close, a thread.

A subclass decides what to do with each accepted connection (``_accept``). Threads, not an
event loop: the process under test may be a separate process, and the proxy must keep piping
while the test blocks on it.
"""

from __future__ import annotations

import abc
import contextlib
import socket
import threading
from types import TracebackType
from typing import Self

__all__ = ["LoopbackProxy", "close_both_ways"]


class LoopbackProxy(abc.ABC):
    """Listen on a free loopback port (``port``) for connections meant for ``upstream``."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self._upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = [self._listener]
        self._lock = threading.Lock()
        self._accepting = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self) -> Self:
        self._accepting.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for each in sockets:
            close_both_ways(each)
        self._accepting.join(timeout=10)

    @abc.abstractmethod
    def _accept(self) -> None:
        """Serve accepted connections until the listener closes (on the proxy's thread)."""

    def _keep(self, each: socket.socket) -> bool:
        """Remember ``each`` to close on exit; False (and closed) once the proxy is closing."""
        with self._lock:
            if not self._sockets:  # closing: nothing new is kept open
                each.close()
                return False
            self._sockets.append(each)
            return True


def close_both_ways(each: socket.socket) -> None:
    """Shut ``each`` down both ways and close it, whatever state it is in."""
    with contextlib.suppress(OSError):
        each.shutdown(socket.SHUT_RDWR)
    each.close()
