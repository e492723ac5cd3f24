"""The extraction sandbox server: a helper process that forks one limited child per document.

Started once per owner with pypdf and python-docx already imported, it first announces
itself on stdout — ``{"ready": true}``, or ``{"missing": ["pypdf", ...]}`` and exit when the
``documents`` extra is not installed — then reads requests on stdin until it closes: a JSON
header line ``{"reader", "options", "size", "memory", "cpu", "wall", "chars"}`` followed by
``size`` bytes of a PDF or DOCX (``reader``; ``docx_package`` for upload inspection's zip
and XML checks of a .docx) — and for each forks a child that sets
``RLIMIT_AS`` and ``RLIMIT_CPU``, extracts, writes its JSON result to a pipe and exits. The
server kills a child that outlives its wall-clock deadline and answers one JSON line per
request on stdout. A hostile document can only ever take down its own child; isolation
costs a fork, not an interpreter start.

Before it announces itself the server extracts one document of its own (``WARM_UP_PDF``):
pypdf sets much of itself up on first use (about 6 ms), and a child's set-up dies with it,
so without this every child paid it again — half the sandbox's cost per document. The
warm-up never sees a caller's bytes, so what children inherit is the same for all of them.
python-docx and lxml set less up on first use, but some, so the server reads a .docx of its
own too (``_docx_worker.warm_up``): a child reading textract's ``raw_text.docx`` spent 17.8 ms
of CPU without it, 16.0 ms with it (13.4 ms when read again in one process).
"""

from __future__ import annotations

import gc
import json
import os
import resource
import select
import signal
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from esra.core._docstore._text_pdf import text_pdf
from esra.core._docstore.extras import DOCUMENT_READERS
from esra.core._docstore.sandbox import PACKAGE_CHECK

_READ_CHUNK = 1 << 16


# A reader: the document's bytes, its character limit and its reader's options -> the answer.
_Extractor = Callable[[bytes, int, Mapping[str, Any]], dict[str, object]]
# The warm-up document (see the module docstring): our own bytes, never a caller's.
WARM_UP_PDF = text_pdf(["warm up"])


def _child(read: _Extractor, data: bytes, header: dict[str, Any], write_fd: int) -> None:
    memory, cpu = int(header["memory"]), int(header["cpu"])
    try:
        # No core file: a child killed at its CPU limit (SIGXCPU) or crashed by its reader
        # would otherwise write the tenant's document, bytes and text, to wherever the host
        # keeps cores — outside the store, unencrypted, readable by whoever reads crashes.
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
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


def _collect(pid: int, read_fd: int, wall: float) -> dict[str, object]:
    deadline = time.monotonic() + wall
    chunks: list[bytes] = []
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return {"refusal": "MALFORMED_DOCUMENT", "detail": "extraction exceeded its time limit"}
        ready, _, _ = select.select([read_fd], [], [], remaining)
        if not ready:
            continue
        chunk = os.read(read_fd, _READ_CHUNK)
        if not chunk:
            break
        chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    try:
        answer = json.loads(b"".join(chunks))
    except ValueError:
        signal_number = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
        return {"refusal": "MALFORMED_DOCUMENT", "detail": f"extractor died ({signal_number})"}
    return answer if isinstance(answer, dict) else {"refusal": "MALFORMED_DOCUMENT"}


def _serve_one(read: _Extractor, header: dict[str, Any], data: bytes) -> dict[str, object]:
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child, which never returns
        os.close(read_fd)
        # The child must never touch the request/answer channel: point it at /dev/null.
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        _child(read, data, header, write_fd)
    os.close(write_fd)
    try:
        return _collect(pid, read_fd, float(header["wall"]))
    finally:
        os.close(read_fd)


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
    stdout.write(b'{"ready": true}\n')
    stdout.flush()
    while line := stdin.readline():
        header = json.loads(line)
        data = stdin.read(int(header["size"]))
        read = readers.get(str(header.get("reader")), _unknown_reader)
        answer = _serve_one(read, header, data)
        # The largest child so far (the server waits for every child, so this sees them all).
        answer["sandbox_peak_kb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        stdout.write(json.dumps(answer).encode() + b"\n")
        stdout.flush()


if __name__ == "__main__":
    main()
