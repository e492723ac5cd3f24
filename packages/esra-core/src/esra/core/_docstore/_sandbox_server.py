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
It is a signal, not a line on stdin, because the server reads stdin only between children:
a cancellation sent there would wait unseen until the child ended.

Before it announces itself the server extracts one document of its own (``WARM_UP_PDF``):
pypdf sets much of itself up on first use (about 6 ms), and a child's set-up dies with it,
so without this every child paid it again — half the sandbox's cost per document. The
warm-up never sees a caller's bytes, so what children inherit is the same for all of them.
python-docx and lxml set less up on first use, but some, so the server reads a .docx of its
own too (``_docx_worker.warm_up``): a child reading textract's ``raw_text.docx`` spent 17.8 ms
of CPU without it, 16.0 ms with it (13.4 ms when read again in one process).

Tenants' documents pass through one server one after another, and each child is forked with
the server's whole memory, where what was freed is not cleared. So the server keeps no
request's content once it is answered: the document and the child's answer are read
straight from the descriptors (no buffered stream keeps a copy) into buffers it zeroes when
the request ends (``_Scrubbed``), and the answer is checked and relayed undecoded
(``is_json_object``, ``_relay``) — no ``str`` or ``bytes`` of either, which could not be
zeroed, is ever made here. The child makes its own copy, which dies with it. What is not
covered: the kernel's pipe buffers (not process memory), and the current request's own
document, which its child is meant to read. Each child also restricts itself before it reads:
it drops every capability (``_capabilities``: a root server's child holds none), restricts
itself to reading beneath the directories Python needs (``_landlock``: no secret in
``/proc`` or ``/etc``, no tenant's data), and installs a system-call filter (``_seccomp``):
no network, no programs or processes, no file changed. The server builds the file
restriction once, as it starts, so that a child only applies it. Where either is
unavailable, children run without it and the server says which once, as it starts
(``unfiltered`` in its announcement).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import re
import resource
import select
import signal
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from esra.core._docstore import _capabilities, _landlock, _seccomp
from esra.core._docstore._json_shape import is_json_object
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


def _child(read: _Extractor, data: memoryview, header: dict[str, Any], write_fd: int) -> None:
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
        document = bytes(data)  # the child's own copy: it dies with the child
        result = read(document, int(header.get("chars", 1 << 62)), header.get("options") or {})
    except BaseException as exc:
        # MemoryError under the address-space limit, or worse: this document fails, only it.
        result = {"refusal": "MALFORMED_DOCUMENT", "detail": type(exc).__name__}
    payload = json.dumps(result).encode()
    view = memoryview(payload)
    while view:
        written = os.write(write_fd, view)
        view = view[written:]
    os._exit(0)


def _overwrite(buffer: bytearray, size: int | None = None) -> None:
    """Zero ``buffer`` (its first ``size`` bytes) where it lies: memory the server frees is
    handed out again as it is, and every child is forked with all of it."""
    size = len(buffer) if size is None else size
    if size:
        ctypes.memset((ctypes.c_char * size).from_buffer(buffer), 0, size)


class _Scrubbed:
    """One request's content as the server holds it — the document, or a child's answer —
    in a buffer it zeroes before letting it go (``wipe``), and whose every earlier buffer,
    outgrown, it zeroed too: nothing of it stays in memory a later child is forked with.

    Read into in place (``room``), never through ``bytes``: an immutable copy cannot be
    zeroed, and its memory, freed, would keep the content for the next child to find.

    The server keeps one for documents and one for answers across requests: a buffer up to
    ``_KEPT_CAPACITY`` stays, zeroed, for the next request, so that an ordinary request
    allocates nothing (a fresh buffer past glibc's mmap threshold cost a map, an unmap and a
    page fault per page, every request); a larger one is released once zeroed.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self.size = 0

    def view(self) -> memoryview:
        """What is held (a view, not a copy)."""
        return memoryview(self._buffer)[: self.size]

    def room(self, wanted: int) -> memoryview:
        """Up to ``wanted`` bytes after what is held, to read into (what is left of the
        buffer when any is, else ``wanted`` more); ``size`` grows by what was read."""
        spare = len(self._buffer) - self.size
        if spare <= 0:
            grown = bytearray(max(self.size + wanted, 2 * len(self._buffer)))
            memoryview(grown)[: self.size] = self.view()
            _overwrite(self._buffer)
            self._buffer, spare = grown, len(grown) - self.size
        return memoryview(self._buffer)[self.size : self.size + min(wanted, spare)]

    def wipe(self) -> None:
        """Zero what was held; keep the buffer for the next request unless it is large."""
        if len(self._buffer) > _KEPT_CAPACITY:
            _overwrite(self._buffer)
            self._buffer = bytearray()
        else:
            # Only what was held needs zeroing: the rest never held anything since the last
            # wipe (a buffer starts zeroed, and grows into a zeroed one).
            _overwrite(self._buffer, self.size)
        self.size = 0


# The largest buffer kept between requests (a .docx or PDF of ordinary size); a larger one,
# kept, would hold the server's memory at the largest document it ever read.
_KEPT_CAPACITY = 1 << 20


def _read_into(fd: int, into: _Scrubbed, size: int) -> bool:
    """Read ``size`` bytes from ``fd`` into ``into``; False when the input ended first."""
    while into.size < size:
        got = os.readv(fd, [into.room(size - into.size)])
        if not got:
            return False
        into.size += got
    return True


def _header_line(fd: int) -> bytes | None:
    """The request's JSON header line, read a byte at a time so that nothing of the
    document after it is read with it (None: the input closed). It holds no content: the
    reader's name, its options, the size and the limits."""
    line = bytearray()
    while not line.endswith(b"\n"):
        byte = os.read(fd, 1)
        if not byte:
            return None
        line += byte
    return bytes(line)


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


# An answer that is an empty object: the server's keys are written into it, not after a comma.
_EMPTY_OBJECT = re.compile(rb" *+\{ *+\} *+")


def _relay(fd: int, answer: _Scrubbed, server_keys: Mapping[str, object]) -> None:
    """Write the child's answer (a JSON object, ``is_json_object``) as one line, with the
    server's own keys after the child's: the owner's ``json.loads`` keeps the last of a
    repeated key, so a child that wrote ``RETRY_KEY`` itself is overruled."""
    view = answer.view()
    own = json.dumps(server_keys).encode()[1:-1]  # the keys and values, without braces
    if _EMPTY_OBJECT.fullmatch(view):
        _write_all(fd, b"{" + own + b"}\n")
        return
    _write_all(fd, view[: _last_brace(view)])
    _write_all(fd, b", " + own + b"}\n")


def _last_brace(view: memoryview) -> int:
    """Where the object's closing brace is (only spaces follow it)."""
    end = len(view) - 1
    while view[end] != ord("}"):
        end -= 1
    return end


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
    """One child's answer as the server gathers it: read up to ``answer_cap`` bytes into
    ``answer``, and the child's end (its wait status) once it has one."""

    def __init__(
        self,
        pid: int,
        read_fd: int,
        header: Mapping[str, Any],
        answer: _Scrubbed,
        *,
        reaper: bool,
        cancellation: _Cancellation | None = None,
    ):
        self.pid, self.read_fd, self.reaper = pid, read_fd, reaper
        self.cancellation = cancellation
        self.cap = answer_cap(header)
        self.deadline = time.monotonic() + float(header["wall"])
        self.answer = answer
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
        wanted = min(_READ_CHUNK, self.cap + 1 - self.answer.size)
        got = os.readv(self.read_fd, [self.answer.room(wanted)])
        if not got:
            self.reading = False
            return
        self.answer.size += got
        if self.answer.size > self.cap:
            detail = f"extractor answer exceeded its size limit ({self.cap} bytes)"
            self.refusal = {"refusal": "MALFORMED_DOCUMENT", "detail": detail}

    def finish(self) -> dict[str, object] | None:
        """None when ``answer`` is the child's answer to relay (a JSON object), else the
        refusal that classifies the child's end; the child and all it started are ended and
        reaped."""
        killed = self.ended is None
        if killed:
            os.kill(self.pid, signal.SIGKILL)  # not yet reaped: the pid is still its own
            self._reap(0)
        if self.reaper:
            _end_descendants()
        if self.refusal is not None:
            return self.refusal
        assert self.ended is not None
        if is_json_object(self.answer.view()):
            return None
        return self._death(self.ended)

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
    data: memoryview | bytes,
    answer: _Scrubbed,
    *,
    confine: bool,
    ruleset: _landlock.Ruleset | None = None,
    reaper: bool = False,
    cancellation: _Cancellation | None = None,
) -> dict[str, object] | None:
    """Extract ``data`` in a child, its answer read into ``answer``: None when that is a
    JSON object to relay, else the server's refusal. ``confine``: the child installs the
    system-call filter (``_seccomp``) before it reads. ``ruleset``: the file restriction
    (``_landlock``) the child applies before it reads, if any. ``reaper``: this process is a
    child subreaper whose only children are its extraction children (the server), so all the
    child started is ended with it. ``cancellation``: the owner's, which ends the child
    early."""
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
        # No capability first: a root server's child would otherwise hold root's, which
        # reach past the rest (a file opened by handle has no path for the restriction).
        _capabilities.drop_all()
        # Not applied: the server said so when it started (and tried both then). The file
        # restriction first: it is independent of the filter, which need not allow its calls.
        if ruleset is not None:
            _landlock.confine(ruleset)
        if confine:
            _seccomp.confine()
        _child(read, memoryview(data), header, write_fd)
    os.close(write_fd)
    collection = _Collection(pid, read_fd, header, answer, reaper=reaper, cancellation=cancellation)
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
    stdout = sys.stdout.buffer
    readers, missing = _readers()
    if missing:
        stdout.write(json.dumps({"missing": missing}).encode() + b"\n")
        stdout.flush()
        return
    unfiltered = _seccomp.unavailable()
    _capabilities.prepare()
    missing = [] if unfiltered is None else [f"a system-call filter ({unfiltered})"]
    ruleset = _file_restriction(missing)
    announcement: dict[str, object] = {"ready": True}
    if missing:
        # Said once, here and to the owner (whose log this server's is not): every child of
        # this server runs without what is named, held by the rest, its limits and the
        # subreaper.
        announcement["unfiltered"] = "; ".join(missing)
        sys.stderr.write(f"sandbox children run without {announcement['unfiltered']}\n")
        sys.stderr.flush()
    # Every object the children inherit leaves the collector's generations: a collection in a
    # child would otherwise walk (and so copy, page by page) the whole inherited heap. About
    # 1 ms of CPU less per .docx over the real corpus (17.5 -> 16.5 ms).
    gc.freeze()
    reaper = _become_reaper()
    cancellation = _Cancellation()
    stdout.write(json.dumps(announcement).encode() + b"\n")
    stdout.flush()
    # Requests and answers go through the descriptors themselves, never a buffered stream
    # whose buffer would keep the last document or answer read or written (``_Scrubbed``).
    requests, answers = sys.stdin.fileno(), sys.stdout.fileno()
    confine = unfiltered is None
    # Kept across requests, zeroed after each (``_Scrubbed``).
    document, answer = _Scrubbed(), _Scrubbed()
    while _serve_request(
        readers,
        requests,
        answers,
        document,
        answer,
        confine=confine,
        ruleset=ruleset,
        reaper=reaper,
        cancellation=cancellation,
    ):
        pass


def _file_restriction(missing: list[str]) -> _landlock.Ruleset | None:
    """The ruleset every child applies (``_landlock``), built once here, after the readers
    were imported and warmed up (so the libraries they load are mapped, and their
    directories readable); None, with the reason added to ``missing``, where there is
    none."""
    try:
        return _landlock.prepare(_landlock.readable_directories())
    except _landlock.LandlockUnavailableError as absent:
        missing.append(f"Landlock file restriction ({absent})")
        return None


def _serve_request(
    readers: Mapping[str, _Extractor],
    requests: int,
    answers: int,
    document: _Scrubbed,
    answer: _Scrubbed,
    *,
    confine: bool,
    ruleset: _landlock.Ruleset | None,
    reaper: bool,
    cancellation: _Cancellation,
) -> bool:
    """Serve the next request; False once the input closed.

    The document and the child's answer (its text) are read into buffers zeroed once the
    answer is written (``_Scrubbed``), and the answer is relayed undecoded
    (``is_json_object``): the next child is forked from a server whose memory holds neither,
    nor any copy of them, freed or not. What the server does decode is its own: the header
    (reader, options, size, limits) and its refusals.
    """
    # Before the request is read: a cancellation sent while it is read is this request's.
    cancellation.clear()
    line = _header_line(requests)
    if line is None:
        return False
    header = json.loads(line)
    try:
        if not _read_into(requests, document, int(header["size"])):
            return False  # the owner went away mid-request
        read = readers.get(str(header.get("reader")), _unknown_reader)
        refusal = _serve_one(
            read,
            header,
            document.view(),
            answer,
            confine=confine,
            ruleset=ruleset,
            reaper=reaper,
            cancellation=cancellation,
        )
        # The largest child so far (the server waits for every child, so this sees them all).
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        if refusal is None:
            # A child's answer is never retried: RETRY_KEY is never the child's to say.
            _relay(answers, answer, {RETRY_KEY: False, "sandbox_peak_kb": peak})
        else:
            refusal[RETRY_KEY] = isinstance(refusal, _KilledFromOutside)
            refusal["sandbox_peak_kb"] = peak
            _write_all(answers, json.dumps(refusal).encode() + b"\n")
    finally:
        document.wipe()
        answer.wipe()
    return True


if __name__ == "__main__":
    main()
