"""``esra serve --config esra.toml --workers N``: one port, N host processes.

One host process serves on one event loop, whose thread holds the GIL most of the time, so
a second core sits idle. With ``--workers N`` the parent binds the port once (so it is owned
before any worker starts; :func:`reserve_port`) and starts N worker processes of this
interpreter: each composes its own host parts through the normal bootstrap and listens on a
socket of its own in the port's SO_REUSEPORT group, so the kernel spreads new connections
evenly over them.

Nothing per process may be observable by a caller, so N > 1 is refused (:func:`per_process_state`)
unless everything a caller could tell apart lives outside the process: the configuration
(and its version) in a PostgreSQL ``[state] database``, the cache, the fetch quota and the
breakers in ``[redis]``, and the document-reference keys in ``[fetch] keys_file``. These are
the settings of several hosts behind a load balancer (``docs/deployment.md``); the workers
are that, on one machine and one port.

The parent supervises (:class:`WorkerSupervisor`): it prints one start-up line once every
worker accepts, forwards SIGTERM and SIGINT and waits for the workers, exits 1 if a worker
fails to start, and starts a new worker for one that dies unexpectedly, at most N times in
any 60 s (past that it stops them all and exits 1, saying so). A worker stops by itself when
its parent is gone: it watches a pipe only the parent holds open.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, TextIO

import attrs

if TYPE_CHECKING:
    from esra.starlette._settings import HostSettings

__all__ = [
    "MAX_WORKERS",
    "READY",
    "RESTART_WINDOW_S",
    "WorkerSupervisor",
    "per_process_state",
    "reserve_port",
    "worker_listener",
]

MAX_WORKERS = 64  # a typo guard: far above the cores a host process can use
RESTART_WINDOW_S = 60.0
# What a worker writes on its ready pipe once uvicorn accepts (esra.starlette._worker_process).
READY = b"R"
_POLL_S = 0.2
# What a worker's exit status means when the parent asked it to stop: a clean shutdown.
_STOPPED = frozenset({0, -signal.SIGTERM, -signal.SIGINT})


def per_process_state(settings: HostSettings | None) -> tuple[str, ...]:
    """What ``settings`` keep inside each process that a caller could observe, one reason
    each; empty when ``--workers`` above 1 is safe.

    ``None`` is the embedded default: SQLite state in its data directory, and its own
    cache, quota and breakers.
    """
    if settings is None:
        return (
            "the embedded default keeps its configuration, cache, fetch quota and breakers in "
            "the process (use --config with [state] on PostgreSQL and [redis])",
        )
    reasons: list[str] = []
    if not settings.state.on_postgres:
        reasons.append(
            "[state] database is not PostgreSQL: each worker would serve its own configuration "
            "version"
        )
    redis = settings.redis
    if redis is None:
        reasons.append(
            "[redis] is not configured: each worker would keep its own cache, fetch quota and "
            "breakers"
        )
    else:
        off = [name for name in ("cache", "quota", "breakers") if not getattr(redis, name)]
        if off:
            listed = ", ".join(f"{name} = false" for name in off)
            reasons.append(f"[redis] {listed}: each worker would keep its own")
    if settings.keyring is None:
        reasons.append(
            "[fetch] keys_file is not set: a documentRef would open only on the worker that "
            "minted it"
        )
    return tuple(reasons)


def _port_sharing_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host``:``port`` in the port's SO_REUSEPORT group."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # The protocol named, not left 0: asyncio turns Nagle's algorithm off (TCP_NODELAY) only
    # on sockets whose proto is IPPROTO_TCP, and accepted sockets inherit it. Left 0, a
    # response written in two parts waited for the client's delayed ACK, ~40 ms per call.
    shared = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        shared.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        shared.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        shared.bind((host, port))
    except OSError:
        shared.close()
        raise
    return shared


def reserve_port(host: str, port: int) -> socket.socket:
    """The parent's hold on ``host``:``port``: bound before any worker starts, never listening.

    Each worker listens on a socket of its own in the port's SO_REUSEPORT group
    (:func:`worker_listener`), and the kernel spreads new connections evenly over the
    listening ones. One socket shared by every worker would not: the worker whose event loop
    wakes first accepts every pending connection, and kept-alive clients then all load one
    process. This socket never listens, so no connection is ever queued on it.

    Raises:
        OSError: the address cannot be bound (in use, not local, not permitted).
    """
    return _port_sharing_socket(host, port)


def worker_listener(host: str, port: int, *, backlog: int = 2048) -> socket.socket:
    """A worker's listening socket on the port its parent reserved (see :func:`reserve_port`).

    Raises:
        OSError: the address cannot be bound.
    """
    listener = _port_sharing_socket(host, port)
    try:
        listener.listen(backlog)
    except OSError:
        listener.close()
        raise
    return listener


@attrs.define
class _Worker:
    """One worker process and the parent's end of its ready pipe."""

    number: int
    process: subprocess.Popen[bytes]
    ready_fd: int | None
    ready: bool = False


class WorkerSupervisor:
    """Starts and supervises the workers of ``esra serve --workers N`` (see the module).

    Args:
        config: the settings file every worker serves.
        host, port: the address ``reserved`` holds (each worker's resource URL defaults to it).
        workers: how many worker processes.
        reserved: the parent's bound, never-listening socket on the port (``reserve_port``).
        resource_url: the endpoint's URL, for the start-up line.
        err: where the supervisor writes its lines.
    """

    def __init__(
        self,
        *,
        config: Path,
        host: str,
        port: int,
        workers: int,
        reserved: socket.socket,
        resource_url: str,
        err: TextIO,
    ) -> None:
        self._config = config
        self._host = host
        self._port = port
        self._count = workers
        self._reserved = reserved
        self._resource_url = resource_url
        self._err = err
        self._workers: dict[int, _Worker] = {}
        self._deaths: deque[float] = deque()
        self._signals: list[int] = []
        self._selector = selectors.DefaultSelector()
        # Only the parent holds the write end: when the parent is gone, however it went,
        # every worker reads end-of-file and stops.
        self._lifeline_read, self._lifeline_write = os.pipe()

    def run(self) -> int:
        """Serve until SIGTERM or SIGINT, or until the workers cannot be kept running.

        Returns:
            0 after SIGTERM, 130 after SIGINT (as a single ``esra serve``), 1 when a worker
            failed to start or died too often.
        """
        previous = {
            sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)
        }
        try:
            return self._supervise()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self._selector.close()
            os.close(self._lifeline_read)
            os.close(self._lifeline_write)

    def _on_signal(self, sig: int, frame: FrameType | None) -> None:
        self._signals.append(sig)

    def _supervise(self) -> int:
        for number in range(1, self._count + 1):
            self._start(number)
        starting = True
        while not self._signals:
            self._read_ready(starting=starting)
            if starting and all(worker.ready for worker in self._workers.values()):
                starting = False
                pids = ", ".join(str(w.process.pid) for w in self._workers.values())
                self._say(
                    f"ESRA MCP endpoint: {self._resource_url} ({self._count} workers, pids {pids})"
                )
            for worker in list(self._workers.values()):
                status = worker.process.poll()
                if status is None:
                    continue
                self._forget(worker)
                if starting:
                    self._say(
                        f"esra: serve: worker {worker.number} (pid {worker.process.pid}) "
                        f"{_exited(status)} while starting; stopping the others"
                    )
                    self._stop_all(signal.SIGTERM)
                    return 1
                if not self._may_restart():
                    self._say(
                        f"esra: serve: worker {worker.number} (pid {worker.process.pid}) "
                        f"{_exited(status)}; more than {self._count} workers died within "
                        f"{RESTART_WINDOW_S:.0f} s, so all are stopped"
                    )
                    self._stop_all(signal.SIGTERM)
                    return 1
                self._say(
                    f"esra: serve: worker {worker.number} (pid {worker.process.pid}) "
                    f"{_exited(status)}; starting it again"
                )
                self._start(worker.number)
        first = self._signals[0]
        self._stop_all(signal.SIGTERM)
        return 0 if first == signal.SIGTERM else 130

    def _may_restart(self) -> bool:
        now = time.monotonic()
        while self._deaths and now - self._deaths[0] > RESTART_WINDOW_S:
            self._deaths.popleft()
        if len(self._deaths) >= self._count:
            return False
        self._deaths.append(now)
        return True

    def _start(self, number: int) -> None:
        ready_read, ready_write = os.pipe()
        argv = [
            sys.executable, "-m", "esra.starlette._worker_process",
            "--config", str(self._config), "--host", self._host, "--port", str(self._port),
            "--ready-fd", str(ready_write), "--lifeline-fd", str(self._lifeline_read),
        ]  # fmt: skip
        try:
            process = subprocess.Popen(  # noqa: S603 - this interpreter, our own module
                argv,
                pass_fds=(ready_write, self._lifeline_read),
                # Its own process group: a Ctrl-C at the terminal reaches the parent only,
                # which forwards one signal (a second SIGINT would force uvicorn's exit).
                process_group=0,
            )
        finally:
            os.close(ready_write)
        self._workers[number] = _Worker(number, process, ready_read)
        self._selector.register(ready_read, selectors.EVENT_READ, number)

    def _read_ready(self, *, starting: bool) -> None:
        for key, _ in self._selector.select(timeout=_POLL_S):
            worker = self._workers[key.data]
            assert worker.ready_fd is not None  # registered only while open
            data = os.read(worker.ready_fd, 1)
            # Either the worker says it accepts, or its end closed without (it exited):
            # the exit status, read next, tells the rest.
            worker.ready = data == READY
            self._close_ready(worker)
            if worker.ready and not starting:
                self._say(
                    f"esra: serve: worker {worker.number} (pid {worker.process.pid}) accepts again"
                )

    def _close_ready(self, worker: _Worker) -> None:
        if worker.ready_fd is not None:
            self._selector.unregister(worker.ready_fd)
            os.close(worker.ready_fd)
            worker.ready_fd = None

    def _forget(self, worker: _Worker) -> None:
        self._close_ready(worker)
        del self._workers[worker.number]

    def _stop_all(self, sig: int) -> None:
        """Forward ``sig`` to every worker and wait for all; a SIGINT meanwhile forwards
        SIGINT (uvicorn's forced exit), as a second Ctrl-C does to a single process."""
        seen = len(self._signals)
        for worker in self._workers.values():
            _signal(worker.process, sig)
        while self._workers:
            for worker in list(self._workers.values()):
                try:
                    status = worker.process.wait(timeout=_POLL_S)
                except subprocess.TimeoutExpired:
                    continue
                if status not in _STOPPED:
                    self._say(
                        f"esra: serve: worker {worker.number} (pid {worker.process.pid}) "
                        f"{_exited(status)} while stopping"
                    )
                self._forget(worker)
            if signal.SIGINT in self._signals[seen:]:
                seen = len(self._signals)
                for worker in self._workers.values():
                    _signal(worker.process, signal.SIGINT)

    def _say(self, line: str) -> None:
        self._err.write(line + "\n")
        self._err.flush()


def _signal(process: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # it exited meanwhile
        process.send_signal(sig)


def _exited(status: int) -> str:
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:  # a real-time signal has no name
            name = f"signal {-status}"
        return f"was killed by {name}"
    return f"exited with status {status}"
