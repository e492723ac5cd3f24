"""The extraction sandbox server: a helper process that forks one limited child per document.

Started once per owner with pypdf and python-docx already imported, it first announces
itself on stdout — ``{"ready": true}``, or ``{"missing": ["pypdf", ...]}`` and exit when the
``documents`` extra is not installed — then reads requests on stdin until it closes: a JSON
header line ``{"reader", "options", "size", "memory", "cpu", "wall", "chars"}`` followed by
``size`` bytes of a PDF or DOCX (``reader``; ``docx_package`` for upload inspection's zip
and XML checks of a .docx) — and for each forks a child that sets
``RLIMIT_AS`` and ``RLIMIT_CPU``, extracts, writes its JSON result to a pipe and exits. The
server kills a child that outlives its wall-clock deadline, reads no more of its answer
than an honest one can take (``answer_cap``), ends whatever the child forked with it (the
server is a child subreaper, ``_end_descendants``), tells a kill from outside (the OOM
killer: retried) from the child's own limits and crashes (``_Collection._death``), and
answers one JSON line per request on stdout. A hostile document can only ever take down its
own child; isolation costs a fork, not an interpreter start.

``CANCEL_SIGNAL`` from the owner cancels the request being served (``_Cancellation``): its
child is killed and all it started ended, as at the wall-clock deadline, and the answer is
a refusal no one retries — the owner's caller abandoned the document, and takes no answer.
It is a signal, not a line on stdin, because stdin is read ahead (buffered) while a request
is read, and a cancellation sent then would wait there unseen until the child ended.

Before it announces itself the server extracts one document of its own (``WARM_UP_PDF``):
pypdf sets much of itself up on first use (about 6 ms), and a child's set-up dies with it,
so without this every child paid it again — half the sandbox's cost per document. The
warm-up never sees a caller's bytes, so what children inherit is the same for all of them.
python-docx and lxml set less up on first use, but some, so the server reads a .docx of its
own too (``_docx_worker.warm_up``): a child reading textract's ``raw_text.docx`` spent 17.8 ms
of CPU without it, 16.0 ms with it (13.4 ms when read again in one process).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import resource
import select
import signal
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, BinaryIO

from esra.core._docstore._text_pdf import text_pdf
from esra.core._docstore.extras import DOCUMENT_READERS
from esra.core._docstore.sandbox import CANCEL_SIGNAL, PACKAGE_CHECK, RETRY_KEY

_READ_CHUNK = 1 << 16
# The sizes ``answer_cap`` bounds an honest answer with (see there): the JSON of one
# character at most, of one .docx unit's boundary and label quoting at most, and the rest
# (keys, a refusal's detail), far above what any takes.
_JSON_BYTES_PER_CHAR = 12
_JSON_BYTES_PER_UNIT = 32
_ANSWER_SLACK = 1 << 16
# How often a child that closed its answer is checked for its end where there is no pidfd.
_EXIT_POLL_S = 0.001
_PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
_TIME_LIMIT = "extraction exceeded its time limit"
_CPU_LIMIT = "extraction exceeded its CPU limit"
_CANCELLED = "extraction cancelled by its caller"


# A reader: the document's bytes, its character limit and its reader's options -> the answer.
_Extractor = Callable[[bytes, int, Mapping[str, Any]], dict[str, object]]
# The warm-up document (see the module docstring): our own bytes, never a caller's.
WARM_UP_PDF = text_pdf(["warm up"])


def _child(read: _Extractor, data: bytes, header: dict[str, Any], write_fd: int) -> None:
    memory, cpu = int(header["memory"]), int(header["cpu"])
    try:
        # No core file: a child killed at its CPU limit or crashed by its reader would
        # otherwise write the tenant's document, bytes and text, to wherever the host keeps
        # cores — outside the store, unencrypted, readable by whoever reads crashes.
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        # The hard limit a second past the soft one: the kernel ends a child at its soft limit
        # with SIGXCPU, and only at its hard limit with SIGKILL — so the CPU limit has a
        # signal of its own, and a SIGKILL we did not send came from outside (``_death``).
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        result = read(data, int(header.get("chars", 1 << 62)), header.get("options") or {})
    except BaseException as exc:
        # MemoryError under the address-space limit, or worse: this document fails, only it.
        result = {"refusal": "MALFORMED_DOCUMENT", "detail": type(exc).__name__}
    payload = json.dumps(result).encode()
    view = memoryview(payload)
    while view:
        written = os.write(write_fd, view)
        view = view[written:]
    os._exit(0)


def answer_cap(header: Mapping[str, Any]) -> int:
    """The most bytes an honest child's answer can take under ``header``'s limits.

    A reader stops at ``chars`` characters of text, and each takes at most 12 bytes of
    JSON (an astral character is escaped as a surrogate pair, ``"\\ud83d\\ude00"``); a
    .docx's labels are cut from its own text, so they take as much again at most. Each of
    its units (at most ``options["segments"]``) adds a boundary and a label's quoting. A
    PDF's pages count one character each against ``chars``, which covers their quoting.
    """
    chars = int(header.get("chars", 1 << 62))
    options = header.get("options") or {}
    units = int(options.get("segments", 0)) if isinstance(options, Mapping) else 0
    return 2 * _JSON_BYTES_PER_CHAR * chars + _JSON_BYTES_PER_UNIT * units + _ANSWER_SLACK


def _children() -> list[int]:
    """This process's children, read from /proc (none where there is no /proc)."""
    me, found = os.getpid(), []
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as stat:
                    fields = stat.read().rpartition(b")")[2].split()
            except OSError:
                continue  # ended while we looked
            if len(fields) > 1 and int(fields[1]) == me:
                found.append(int(entry))
    return found


def _end_descendants() -> None:
    """Kill and reap every process the child left behind.

    The server is a child subreaper (``_become_reaper``): whatever the child forked, and
    whatever those forked, is reparented to the server when its parent ends — whether it
    left the child's process group or session or not — so killing the server's children
    until none is left ends them all. A process killed while forking takes its fork with
    it (the kernel aborts a fork with a fatal signal pending), so this ends.
    """
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return  # none left
        if pid:
            continue  # one reaped: look again
        killed = 0
        for child in _children():
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
                killed += 1
        if not killed:
            return  # none we can see (no /proc): never wait on what we cannot end
        with contextlib.suppress(ChildProcessError):
            os.waitpid(-1, 0)


class _Cancellation:
    """The owner's cancellation of the request being served: ``CANCEL_SIGNAL`` sets
    ``requested``, and wakes a ``select`` on ``fd`` (Python runs the handler between
    bytecodes; the wake-up descriptor is written at once, so a wait ends).

    Cleared as each request is read: one sent between requests is for the one before, which
    its owner no longer waits for (and an owner never sends one to a server it reuses).
    """

    def __init__(self) -> None:
        self.fd, self._wake = os.pipe()
        os.set_blocking(self.fd, False)
        os.set_blocking(self._wake, False)  # the wake-up descriptor must never block
        self.requested = False
        signal.signal(signal.Signals[CANCEL_SIGNAL], self._on_signal)
        signal.set_wakeup_fd(self._wake)

    def _on_signal(self, _signal_number: int, _frame: object) -> None:
        self.requested = True

    def clear(self) -> None:
        self.requested = False
        self.drain()

    def drain(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while os.read(self.fd, _READ_CHUNK):
                pass

    def forget(self) -> None:
        """In a child: hold nothing of the server's cancellation."""
        signal.set_wakeup_fd(-1)
        signal.signal(signal.Signals[CANCEL_SIGNAL], signal.SIG_DFL)
        os.close(self.fd)
        os.close(self._wake)


def _exit_watch(pid: int) -> int | None:
    """A descriptor readable once ``pid`` has ended (a pidfd), where the kernel has them."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


class _Collection:
    """One child's answer as the server gathers it: read up to ``answer_cap`` bytes, and the
    child's end (its wait status) once it has one."""

    def __init__(
        self,
        pid: int,
        read_fd: int,
        header: Mapping[str, Any],
        *,
        reaper: bool,
        cancellation: _Cancellation | None = None,
    ):
        self.pid, self.read_fd, self.reaper = pid, read_fd, reaper
        self.cancellation = cancellation
        self.cap = answer_cap(header)
        self.deadline = time.monotonic() + float(header["wall"])
        self.answer = bytearray()
        self.reading = True
        self.ended: int | None = None  # the child's wait status, once reaped
        self.refusal: dict[str, object] | None = None

    def run(self) -> None:
        """Read and wait until the answer is complete and the child ended, or a limit is
        passed (``refusal``)."""
        watch = _exit_watch(self.pid)
        try:
            while self.reading or self.ended is None:
                if self.cancellation is not None and self.cancellation.requested:
                    self.refusal = _Cancelled(refusal="MALFORMED_DOCUMENT", detail=_CANCELLED)
                    return
                remaining = self.deadline - time.monotonic()
                if remaining <= 0:
                    self.refusal = {"refusal": "MALFORMED_DOCUMENT", "detail": _TIME_LIMIT}
                    return
                self._step(watch, remaining)
                if self.refusal is not None:
                    return
        finally:
            if watch is not None:
                os.close(watch)

    def _step(self, watch: int | None, remaining: float) -> None:
        fds = [self.read_fd] if self.reading else []
        if watch is not None and self.ended is None:
            fds.append(watch)
        if not fds:
            # No pidfd (an old kernel): the answer is in and the child is ending; poll it.
            self._reap(os.WNOHANG)
            if self.ended is None:
                time.sleep(min(remaining, _EXIT_POLL_S))
            return
        if self.cancellation is not None:
            fds.append(self.cancellation.fd)
        ready, _, _ = select.select(fds, [], [], remaining)
        if self.cancellation is not None and self.cancellation.fd in ready:
            self.cancellation.drain()  # ``run`` looks at the request before the next wait
            return
        if watch is not None and watch in ready:
            self._reap(0)
        if self.read_fd in ready:
            self._read()

    def _reap(self, options: int) -> None:
        pid, status = os.waitpid(self.pid, options)
        if pid == 0:
            return
        self.ended = status
        if self.reaper:
            # What it left behind may hold the answer's pipe open, and has the document.
            _end_descendants()

    def _read(self) -> None:
        # Never more than one byte past the cap: that byte is the proof it was passed.
        chunk = os.read(self.read_fd, min(_READ_CHUNK, self.cap + 1 - len(self.answer)))
        if not chunk:
            self.reading = False
            return
        self.answer += chunk
        if len(self.answer) > self.cap:
            detail = f"extractor answer exceeded its size limit ({self.cap} bytes)"
            self.refusal = {"refusal": "MALFORMED_DOCUMENT", "detail": detail}

    def finish(self) -> dict[str, object]:
        """The answer, or the refusal that classifies the child's end; the child and all it
        started are ended and reaped."""
        killed = self.ended is None
        if killed:
            os.kill(self.pid, signal.SIGKILL)  # not yet reaped: the pid is still its own
            self._reap(0)
        if self.reaper:
            _end_descendants()
        if self.refusal is not None:
            return self.refusal
        assert self.ended is not None
        status = self.ended
        try:
            answer = json.loads(self.answer)
        except ValueError:
            return self._death(status)
        if not isinstance(answer, dict):
            return {"refusal": "MALFORMED_DOCUMENT"}
        return answer

    def _death(self, status: int) -> dict[str, object]:
        """How a child that left no answer ended: its CPU limit, a kill from outside, or a
        crash (its signal)."""
        signal_number = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
        if signal_number == signal.SIGXCPU:
            return {"refusal": "MALFORMED_DOCUMENT", "detail": _CPU_LIMIT}
        if signal_number == signal.SIGKILL:
            # Not ours (a child we kill is refused before this). Our limits never send it: the
            # CPU limit ends a child with SIGXCPU, and RLIMIT_AS fails an allocation instead.
            # It came from outside — the OOM killer, choosing by the host's memory, not by this
            # document, or an operator — and says nothing of the document: retried, within
            # the attempt ceiling. (A hostile child that sends it itself, or ignores SIGXCPU
            # until its hard limit, gains no more than by killing its server, which is
            # retried the same way.)
            return _KilledFromOutside(
                refusal="MALFORMED_DOCUMENT",
                detail="extractor killed from outside (SIGKILL: the OOM killer?)",
            )
        return {"refusal": "MALFORMED_DOCUMENT", "detail": f"extractor died ({signal_number})"}


class _Cancelled(dict[str, object]):
    """The refusal of a child killed because its request was cancelled: never retried (it
    is no ``_KilledFromOutside``). An owner that cancelled takes no answer; one that did not
    (the child signalled its own server) fails the document, as by any end the child
    brought on itself."""


class _KilledFromOutside(dict[str, object]):
    """The refusal of a child killed from outside: a type no JSON answer decodes to, so
    that no child can claim it (``RETRY_KEY`` is set from it alone)."""


def _serve_one(
    read: _Extractor,
    header: dict[str, Any],
    data: bytes,
    *,
    reaper: bool = False,
    cancellation: _Cancellation | None = None,
) -> dict[str, object]:
    """Extract ``data`` in a child and return its answer. ``reaper``: this process is a
    child subreaper whose only children are its extraction children (the server), so all
    the child started is ended with it. ``cancellation``: the owner's, which ends the
    child early."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child, which never returns
        os.close(read_fd)
        # The child must never touch the request/answer channel: point it at /dev/null.
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        if cancellation is not None:
            cancellation.forget()
        _child(read, data, header, write_fd)
    os.close(write_fd)
    collection = _Collection(pid, read_fd, header, reaper=reaper, cancellation=cancellation)
    try:
        collection.run()
        return collection.finish()
    finally:
        os.close(read_fd)


def _become_reaper() -> bool:
    """Make this process the child subreaper of all it forks (Linux), so that nothing a
    child starts can outlive it by being orphaned to init; whether it is one."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (AttributeError, OSError):
        return False


def _missing(exc: ImportError, default: str) -> str:
    """The distribution to install for a failed import (``docx`` is python-docx)."""
    module = (exc.name or default).split(".")[0]
    return DOCUMENT_READERS.get(module, module)


def _readers() -> tuple[dict[str, _Extractor], list[str]]:
    """The readers by format, and the distributions of those that cannot be imported."""
    readers: dict[str, _Extractor] = {}
    missing: list[str] = []
    try:
        from esra.core._docstore._pdf_worker import extract_pages  # noqa: PLC0415
    except ImportError as exc:
        missing.append(_missing(exc, "pypdf"))
    else:
        extract_pages(WARM_UP_PDF, 1 << 20)
        readers["pdf"] = lambda data, chars, _options: extract_pages(data, chars)
    try:
        from esra.core._docstore._docx_worker import (  # noqa: PLC0415
            check_package,
            extract_docx,
            warm_up,
        )
    except ImportError as exc:
        missing.append(_missing(exc, "docx"))
    else:
        warm_up()  # its extraction runs the package checks first: they are warmed up too
        readers["docx"] = extract_docx
        readers[PACKAGE_CHECK] = check_package
    return readers, missing


def _unknown_reader(_data: bytes, _chars: int, _options: Mapping[str, Any]) -> dict[str, object]:
    return {"refusal": "MALFORMED_DOCUMENT", "detail": "no sandbox reader for this format"}


def main() -> None:
    """Announce readiness (or the missing extra), then serve requests until stdin closes."""
    # Ctrl-C signals the owner's whole process group, and a service manager may signal
    # every process of the unit: a server (or child, which inherits this) that died with
    # its owner's stop failed the document in hand for good, as malformed. Its lifetime is
    # its owner's: it ends when its input closes, or is killed by the owner.
    for stop in (signal.SIGINT, signal.SIGTERM):
        signal.signal(stop, signal.SIG_IGN)
    # The server holds each request's bytes too: no core of it either (see ``_child``).
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    readers, missing = _readers()
    if missing:
        stdout.write(json.dumps({"missing": missing}).encode() + b"\n")
        stdout.flush()
        return
    # Every object the children inherit leaves the collector's generations: a collection in a
    # child would otherwise walk (and so copy, page by page) the whole inherited heap. About
    # 1 ms of CPU less per .docx over the real corpus (17.5 -> 16.5 ms).
    gc.freeze()
    reaper = _become_reaper()
    cancellation = _Cancellation()
    stdout.write(b'{"ready": true}\n')
    stdout.flush()
    while _serve_request(readers, stdin, stdout, reaper=reaper, cancellation=cancellation):
        pass


def _serve_request(
    readers: Mapping[str, _Extractor],
    stdin: BinaryIO,
    stdout: BinaryIO,
    *,
    reaper: bool,
    cancellation: _Cancellation,
) -> bool:
    """Serve the next request; False once the input closed.

    A function of its own so that the request's bytes and its answer (the document's text)
    die with its frame: the next child is forked from a server that holds neither, where a
    loop's variables held the last answer until the next request's child was forked.
    """
    # Before the request is read: a cancellation sent while it is read is this request's.
    cancellation.clear()
    line = stdin.readline()
    if not line:
        return False
    header = json.loads(line)
    data = stdin.read(int(header["size"]))
    read = readers.get(str(header.get("reader")), _unknown_reader)
    answer = _serve_one(read, header, data, reaper=reaper, cancellation=cancellation)
    answer[RETRY_KEY] = isinstance(answer, _KilledFromOutside)  # never the child's to say
    # The largest child so far (the server waits for every child, so this sees them all).
    answer["sandbox_peak_kb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    stdout.write(json.dumps(answer).encode() + b"\n")
    stdout.flush()
    return True


if __name__ == "__main__":
    main()
