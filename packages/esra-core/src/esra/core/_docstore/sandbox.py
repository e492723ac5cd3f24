"""The client side of the extraction sandbox server (``_sandbox_server``), and its lifetime.

Every PDF and DOCX is parsed there, each in a limited child process of its own: pypdf and
python-docx (with lxml) read untrusted bytes, and a document that exhausts their time or
memory, or crashes them, must fail alone and classified, never take the worker with it.
Upload inspection's zip and XML checks of a ``.docx`` run there too
(``check_docx_package``), so that a hostile package never costs the upload process more than
a request and an answer.

Each server answers one request at a time; an owner keeps up to ``max_servers`` of them
(``DEFAULT_MAX_SERVERS``), started as requests need them and reused while idle, so that
concurrent uploads are checked side by side: with one server, a hostile package held every
other upload of the process — every tenant's — for up to its wall limit (60 s). A request
past ``max_servers`` waits for a server to come free. A request names its ``holder`` (the
tenant it is made for), and one holder is lent at most ``max_servers - 1`` servers at once:
however many hostile packages one tenant sends together, a server stays free for the
others. A server is restarted when it dies (the request it was serving fails as
``SandboxUnavailableError``, which an ingestion worker retries: a server's death says nothing
of the document), and none is used across a fork. Every server
process is always reaped: ``close()`` (or leaving the ``with`` block) ends the idle ones at
once and the busy ones as their requests end, a garbage-collected sandbox ends them through
finalizers, and the process-wide default used by ``extract`` is closed at interpreter exit.
A server that dies is reaped at once, never just killed and dropped. The server announces
itself with one line before serving; if it cannot import pypdf or python-docx (the
``documents`` extra is not installed) it says so and exits, and the caller gets
``MissingExtraError``, not a document failure.

A request can be cancelled from another thread through the ``CancelToken`` it was given (an
ingestion worker's, when it abandons a document whose lease it lost): one waiting for a
server stops waiting, and one being served has its server told (``CANCEL_SIGNAL``) to kill
the request's child and all the child started, so that abandoned work stops costing CPU and
memory. Only the server lent to that request is told, and it serves no other request: no
other document's child is touched. The request ends in ``ExtractionCancelledError``, which
is no refusal: a cancelled extraction says nothing of its document. A server that was told
is not reused (the next request starts another), so a cancellation can only ever reach the
request it was meant for.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import json
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping
from types import TracebackType
from typing import Self

import attrs

from esra.core._docstore.extras import MissingExtraError
from esra.core._docstore.formats import DocumentFormat
from esra.core._docstore.refusals import Breach, DocumentRefusedError
from esra.core._docstore.zipguard import ZipLimits
from esra.core.codes import DocumentRefusal

__all__ = [
    "CANCEL_SIGNAL",
    "DEFAULT_MAX_SERVERS",
    "CancelToken",
    "ExtractionCancelledError",
    "ExtractionSandbox",
    "SandboxLimits",
    "SandboxUnavailableError",
    "answer_refusal",
    "default_sandbox",
]

# How long a server may take to import its readers and announce itself, and to exit once its
# input closes, before it is killed: safety nets, far above what either takes.
_ANNOUNCE_TIMEOUT_S = 60.0
_STOP_TIMEOUT_S = 5.0
# How long a server told to cancel its request may take to answer (it kills the child at
# once) before it is taken for dead: a safety net, like the two above.
_CANCEL_TIMEOUT_S = 5.0
# The signal that tells a server to kill the child serving its current request and answer
# at once. Out of band: the server reads its stdin, the request channel, only between
# children, so a cancellation written there would wait unseen until the child ended.
# By name: the sandbox runs only where processes fork, but this module is imported anywhere.
CANCEL_SIGNAL = "SIGUSR1"
_log = logging.getLogger(__name__)
# The server's name for upload inspection's checks of a .docx package (not a reader).
PACKAGE_CHECK = "docx_package"
# The server's own key in every answer it relays (it overwrites whatever a child wrote
# there): true only when the child was killed from outside, by no limit of ours — the OOM
# killer — which says nothing of the document, so the request is retried like a server's
# death.
RETRY_KEY = "sandbox_retry"
# Servers an owner keeps at most: enough that a few hostile packages, each held to its
# limits, leave the other uploads a server. Each costs an interpreter with the readers
# imported while it lives, and each request's child its own limits.
DEFAULT_MAX_SERVERS = 4


class _ServerFailure(dict[str, object]):
    """The answer this side makes up when the server itself failed: a type no JSON answer
    decodes to, so a child broken into by its document cannot claim the server died."""


class SandboxUnavailableError(DocumentRefusedError):
    """The sandbox server died under the request, or did not start, or the request's child
    was killed from outside (the OOM killer): nothing was learnt about the document (its
    child's own deaths are classified where the server reaps it), so
    an ingestion worker retries it, within the attempt ceiling, rather than failing it for
    good. Classified ``MALFORMED_DOCUMENT`` like any unreadable document when it must be."""


class ExtractionCancelledError(Exception):
    """The request was cancelled through its ``CancelToken`` before its answer was taken:
    nothing was learnt about the document, and no refusal is made of it."""


class CancelToken:
    """Cancels, from any thread, the sandbox requests it is given to (``cancel()``).

    A request waiting for a server stops waiting; one being served has its child killed,
    with all the child started. Either ends in ``ExtractionCancelledError``, as does a
    request made with a token already cancelled. A token is one piece of work's: cancelled,
    it stays cancelled.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled = False
        self._callbacks: dict[int, Callable[[], None]] = {}
        self._next = 0

    @property
    def cancelled(self) -> bool:
        """Whether ``cancel()`` was called (read without the lock: it never goes back)."""
        return self._cancelled

    def cancel(self) -> None:
        """Cancel the work: every request waiting under this token is woken to end."""
        with self._lock:
            if self._cancelled:
                return
            self._cancelled = True
            # Under the lock: once ``on_cancel`` has left, its callback never runs (it may
            # write to a descriptor closed, and its number reused, right after).
            for callback in self._callbacks.values():
                callback()
            self._callbacks.clear()

    @contextlib.contextmanager
    def on_cancel(self, callback: Callable[[], None]) -> Iterator[None]:
        """Run ``callback`` (briefly: it holds the token's lock, and may run in the canceller's
        thread) if the token is cancelled while the block runs, or at once if it already
        was; never after the block."""
        with self._lock:
            if self._cancelled:
                callback()
                key = None
            else:
                key = self._next
                self._next += 1
                self._callbacks[key] = callback
        try:
            yield
        finally:
            if key is not None:
                with self._lock:
                    self._callbacks.pop(key, None)


@contextlib.contextmanager
def _wake_up_on(cancel: CancelToken) -> Iterator[int]:
    """A descriptor that becomes readable once ``cancel`` is cancelled, for a ``select``."""
    woken, wake = os.pipe()

    def wake_up() -> None:
        os.write(wake, b"\0")  # once, into an empty pipe: never blocks

    try:
        with cancel.on_cancel(wake_up):
            yield woken
    finally:
        os.close(woken)
        os.close(wake)


@attrs.frozen
class SandboxLimits:
    """Limits of the child process one document (PDF or DOCX) is extracted in, or a .docx
    package checked in at upload; ``max_chars`` bounds an extraction's text. A breach fails
    the document as ``MALFORMED_DOCUMENT``."""

    memory_bytes: int = 768 * 1024 * 1024
    cpu_seconds: int = 30
    wall_seconds: float = 60.0
    max_chars: int = 32 * 1024 * 1024


def _stop(server: subprocess.Popen[bytes]) -> None:
    """End ``server`` and reap it: closing its input ends its loop; kill it if it lingers."""
    with contextlib.suppress(OSError):
        if server.stdin is not None:
            server.stdin.close()
    try:
        server.wait(timeout=_STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
    if server.stdout is not None:
        server.stdout.close()


def answer_refusal(answer: Mapping[str, object]) -> DocumentRefusedError:
    """A sandbox child's refusal: its reason and breach when they are ours to name, else
    ``MALFORMED_DOCUMENT`` (a child that died or answered out of shape);
    ``SandboxUnavailableError`` when the server itself failed."""
    if isinstance(answer, _ServerFailure) or answer.get(RETRY_KEY) is True:
        return SandboxUnavailableError(
            DocumentRefusal.MALFORMED_DOCUMENT, detail=str(answer.get("detail", ""))
        )
    try:
        refusal = DocumentRefusal(str(answer.get("refusal")))
    except ValueError:
        refusal = DocumentRefusal.MALFORMED_DOCUMENT
    try:
        breach = Breach(str(answer["breach"])) if answer.get("breach") is not None else None
    except ValueError:
        breach = None
    return DocumentRefusedError(refusal, detail=str(answer.get("detail", "")), breach=breach)


def _announcement(server: subprocess.Popen[bytes]) -> dict[str, object] | None:
    assert server.stdout is not None
    ready, _, _ = select.select([server.stdout], [], [], _ANNOUNCE_TIMEOUT_S)
    if not ready:
        return None
    try:
        answer = json.loads(server.stdout.readline() or b"null")
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None


class ExtractionSandbox:
    """Extraction sandbox servers owned by whoever holds this object; close it when done.

    Args:
        max_servers: how many requests are served at once (each by a server of its own);
            more wait for one to come free. One holder (a request's ``holder``, the tenant)
            is lent at most ``max_servers - 1`` at once (one when there is only one); a
            request naming none only waits for a free server.
    """

    def __init__(self, max_servers: int = DEFAULT_MAX_SERVERS) -> None:
        if max_servers < 1:
            msg = "max_servers must be at least 1"
            raise ValueError(msg)
        self._max_servers = max_servers
        # What one holder may be lent at once: all but one server, so no holder's requests
        # can keep every other holder waiting (all of them with a single server).
        self._holder_cap = max(1, max_servers - 1)
        self._free = threading.Condition()
        self._idle: list[subprocess.Popen[bytes]] = []
        self._lent = 0
        self._lent_to: collections.Counter[str] = collections.Counter()
        # Each server's finalizer, by process id: stops and reaps it once, at close, when the
        # sandbox is collected, or at exit.
        self._finalizers: dict[
            int, weakref.finalize[[subprocess.Popen[bytes]], ExtractionSandbox]
        ] = {}
        # Raised by ``close()``: a server lent before it is stopped when given back.
        self._generation = 0
        self._owner = os.getpid()
        # Servers inherited across a fork belong to the parent: kept, never stopped here.
        self._inherited: list[subprocess.Popen[bytes]] = []
        self.peak_rss_kb = 0

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def server_pid(self) -> int | None:
        """An idle server's process id (the next request's), if one is kept for this
        process."""
        with self._free:
            if self._owner != os.getpid() or not self._idle:
                return None
            return self._idle[-1].pid

    def close(self) -> None:
        """Stop and reap the idle servers now and the busy ones as their requests end; the
        next request starts a new one."""
        with self._free:
            self._adopt_fork()
            self._generation += 1
            stopping = [self._finalizers.pop(server.pid, None) for server in self._idle]
            self._idle.clear()
        # Outside the lock, which is never held across a wait: a server may take its stop
        # timeout to end, and a cancelled request's waker takes the lock from its thread.
        for finalizer in stopping:
            if finalizer is not None:
                finalizer()

    def _adopt_fork(self) -> None:
        """After a fork, leave the parent's servers to it (called holding ``_free``)."""
        if self._owner == os.getpid():
            return
        self._inherited.extend(self._idle)
        for finalizer in self._finalizers.values():
            finalizer.detach()
        self._idle, self._finalizers, self._lent = [], {}, 0
        self._lent_to.clear()
        self._owner = os.getpid()

    def _stop_owned(self, server: subprocess.Popen[bytes]) -> None:
        """Stop and reap one of this process's servers through its finalizer (which runs
        ``_stop`` once, and never again at exit)."""
        finalizer = self._finalizers.pop(server.pid, None)
        if finalizer is not None:
            finalizer()

    def _start(self) -> subprocess.Popen[bytes] | None:
        """A new server that announced itself ready, or None when it died first.

        Raises:
            MissingExtraError: the server cannot import pypdf or python-docx.
        """
        env = {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "PATH": os.defpath}
        server = subprocess.Popen(
            [sys.executable, "-m", "esra.core._docstore._sandbox_server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        announced = _announcement(server)
        if announced is not None and announced.get("ready") is True:
            unfiltered = announced.get("unfiltered")
            if isinstance(unfiltered, str):
                _warn_unfiltered(unfiltered)
            return server
        _stop(server)
        missing = announced.get("missing") if announced is not None else None
        if isinstance(missing, list) and missing:
            raise MissingExtraError(tuple(str(name) for name in missing))
        return None

    def _borrow(
        self, holder: str | None, cancel: CancelToken | None
    ) -> tuple[subprocess.Popen[bytes] | None, int]:
        """An idle live server, or one started for the request (None: it died starting),
        with the generation it is lent in; waits while ``max_servers`` are lent, or while
        ``holder`` holds all a holder may, unless ``cancel`` is cancelled.

        Raises:
            MissingExtraError: the server cannot import pypdf or python-docx.
            ExtractionCancelledError: ``cancel`` was cancelled before a server was lent.
        """
        # Registered outside the lock, which the waker takes: never the other way round.
        with (
            cancel.on_cancel(self._wake_waiters) if cancel else contextlib.nullcontext(),
            self._free,
        ):
            self._adopt_fork()
            while self._must_wait(holder):
                if cancel is not None and cancel.cancelled:
                    raise ExtractionCancelledError
                self._free.wait()
            if cancel is not None and cancel.cancelled:
                raise ExtractionCancelledError
            self._lent += 1
            if holder is not None:
                self._lent_to[holder] += 1
            generation = self._generation
            while self._idle:
                server = self._idle.pop()
                if server.poll() is None:
                    return server, generation
                self._stop_owned(server)  # died while idle: reaped, never reused
        # Started outside the lock (importing the readers takes a while); the place is held.
        try:
            started = self._start()
        except BaseException:
            self._give_back(None, generation, holder, reusable=False)
            raise
        if started is not None:
            with self._free:
                self._finalizers[started.pid] = weakref.finalize(self, _stop, started)
        return started, generation

    def _must_wait(self, holder: str | None) -> bool:
        """Whether a request for ``holder`` must wait for a server (called holding
        ``_free``)."""
        return (not self._idle and self._lent >= self._max_servers) or self._at_cap(holder)

    def _wake_waiters(self) -> None:
        """Wake every request waiting for a server, to look at its token again."""
        with self._free:
            self._free.notify_all()

    def _at_cap(self, holder: str | None) -> bool:
        """Whether ``holder`` is lent all a holder may be (called holding ``_free``); a
        request that names none is held only to ``max_servers``."""
        return holder is not None and self._lent_to[holder] >= self._holder_cap

    def _give_back(
        self,
        server: subprocess.Popen[bytes] | None,
        generation: int,
        holder: str | None,
        *,
        reusable: bool,
    ) -> None:
        """Keep ``server`` for the next request, or stop it if it is not ``reusable`` (its
        request failed), died, or was lent before a ``close()``; free its place."""
        stopping = None
        with self._free:
            if self._owner != os.getpid():
                return  # lent by the parent: its to keep
            self._lent -= 1
            if holder is not None:
                self._lent_to[holder] -= 1
                if not self._lent_to[holder]:
                    del self._lent_to[holder]
            if server is not None:
                if reusable and server.poll() is None and generation == self._generation:
                    self._idle.append(server)
                else:
                    stopping = self._finalizers.pop(server.pid, None)
            # Every waiter: the one a single wake-up reaches may be a holder at its cap.
            self._free.notify_all()
        if stopping is not None:
            # Outside the lock: a server out of step may take its stop timeout to end.
            stopping()

    def extract(
        self,
        data: bytes,
        limits: SandboxLimits,
        *,
        reader: DocumentFormat,
        options: Mapping[str, object] | None = None,
        holder: str | None = None,
        cancel: CancelToken | None = None,
    ) -> dict[str, object]:
        """Send one document to a server, to be read as ``reader`` (PDF or DOCX) with that
        reader's ``options``, for ``holder`` (the tenant); its answer, or a refusal when the
        server died. ``cancel`` ends the request early, and its child with it.

        Raises:
            MissingExtraError: the server cannot import pypdf or python-docx.
            ExtractionCancelledError: ``cancel`` was cancelled before the answer was taken.
        """
        return self._request(
            reader.value, data, limits, options=options, holder=holder, cancel=cancel
        )

    def check_docx_package(
        self,
        data: bytes,
        limits: SandboxLimits,
        zip_limits: ZipLimits,
        *,
        holder: str | None = None,
    ) -> dict[str, object]:
        """Run upload inspection's zip and XML checks of a ``.docx`` (``inflate_members``
        under ``zip_limits``, then ``check_docx_members``) in a child under ``limits``, for
        ``holder`` (the tenant).

        Returns ``{"checked": true}``, or a refusal (``{"refusal", "detail", "breach"}``:
        the checks' own, or ``MALFORMED_DOCUMENT`` when the child exhausted a limit or died).

        Raises:
            MissingExtraError: the server cannot import pypdf or python-docx.
        """
        options = {"zip": attrs.asdict(zip_limits)}
        return self._request(
            PACKAGE_CHECK, data, limits, options=options, holder=holder, cancel=None
        )

    def _request(
        self,
        reader: str,
        data: bytes,
        limits: SandboxLimits,
        *,
        options: Mapping[str, object] | None,
        holder: str | None,
        cancel: CancelToken | None,
    ) -> dict[str, object]:
        header = {
            "reader": reader,
            "options": dict(options or {}),
            "size": len(data),
            "memory": limits.memory_bytes,
            "cpu": limits.cpu_seconds,
            "wall": limits.wall_seconds,
            "chars": limits.max_chars,
        }
        server, generation = self._borrow(holder, cancel)
        answer: object = None
        told = False
        try:
            if server is None:
                return _ServerFailure(
                    refusal="MALFORMED_DOCUMENT", detail="sandbox server did not start"
                )
            assert server.stdin is not None
            assert server.stdout is not None
            try:
                # Header and bytes written apart: an upload's 25 MB are not copied to join them.
                server.stdin.write(json.dumps(header).encode() + b"\n")
                server.stdin.write(data)
                server.stdin.flush()
                line, told = _answer_line(server, cancel)
                answer = json.loads(line) if line else None
            except (OSError, ValueError):
                answer = None
        finally:
            # Without an answer the server died, or the request was interrupted mid-way and
            # left it out of step: it is stopped, and the next request starts another. One
            # told to cancel is stopped too: no later request can meet that cancellation.
            reusable = isinstance(answer, dict) and not told
            self._give_back(server, generation, holder, reusable=reusable)
        if isinstance(answer, dict):
            peak = answer.get("sandbox_peak_kb")
            if isinstance(peak, int):
                with self._free:
                    self.peak_rss_kb = max(self.peak_rss_kb, peak)
        if cancel is not None and cancel.cancelled:
            raise ExtractionCancelledError  # whatever the answer: nobody takes it
        if not isinstance(answer, dict):
            return _ServerFailure(refusal="MALFORMED_DOCUMENT", detail="sandbox server died")
        return answer


@functools.cache
def _warn_unfiltered(reason: str) -> None:
    """Say once per process (and reason) that sandbox children run without part of their
    containment — the system-call filter (``_seccomp``), the file restriction
    (``_landlock``) — as ``reason`` names: the server's own stderr is not kept."""
    _log.warning("extraction sandbox children run without %s", reason)


def _answer_line(server: subprocess.Popen[bytes], cancel: CancelToken | None) -> tuple[bytes, bool]:
    """The server's answer line (empty: it died), and whether it was told to cancel.

    Told once ``cancel`` is cancelled before the answer comes: the server kills the child,
    and all it started, and answers at once — or it had answered already, which is read the
    same. Only this thread tells it, while the server is lent to this request: a server
    given back is never told.
    """
    assert server.stdout is not None
    if cancel is None:
        return server.stdout.readline(), False
    # Nothing of an answer is read ahead in the stream's buffer: the server writes one line
    # per request, and the last was read whole.
    answers = server.stdout.fileno()
    with _wake_up_on(cancel) as woken:
        ready = _readable([answers, woken], None)
    if answers in ready:
        return server.stdout.readline(), False
    server.send_signal(signal.Signals[CANCEL_SIGNAL])
    ready = _readable([answers], _CANCEL_TIMEOUT_S)
    return (server.stdout.readline() if ready else b""), True


def _readable(fds: list[int], timeout_s: float | None) -> set[int]:
    """Those of ``fds`` readable (or closed) within ``timeout_s`` (None: however long).

    ``poll``, not ``select``: a worker process serving many connections may hold descriptor
    numbers past the 1024 ``select`` can watch.
    """
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    timeout_ms = None if timeout_s is None else int(timeout_s * 1000)
    return {fd for fd, _event in poller.poll(timeout_ms)}


_DEFAULT = ExtractionSandbox()


def default_sandbox() -> ExtractionSandbox:
    """The process-wide sandbox ``extract`` uses unless given one; closed at exit."""
    return _DEFAULT
