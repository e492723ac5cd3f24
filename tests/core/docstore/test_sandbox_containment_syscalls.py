"""A sandbox child cannot reach the network, run programs, start processes or change files.

pypdf, python-docx and lxml (C) parse hostile files in the child; a parser taken over by its
document could, besides its own limits, open a connection, run a program or write a file as
the worker's user. Each child now installs a seccomp filter (``_seccomp``) before it reads
its document, and those system calls are refused (``EPERM``; ``ENOSYS`` for the two whose
flags a filter cannot read, so the C library falls back to the checked forms) — while the
real readers extract exactly what they did.

The server here is the real one (``main``, started as the owner starts it), with a reader
that tries each forbidden thing in its child and reports how it ended; it also holds a
socket, made before it served, that its children inherit — so that ``connect`` itself is
tried, not just ``socket``.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import platform
import re
import socket
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from esra.core._docstore import _seccomp
from esra.core._docstore._text_pdf import text_pdf
from esra.core._docstore.formats import DocumentFormat
from esra.core._docstore.sandbox import ExtractionSandbox, SandboxLimits
from esra.core._docstore.zipguard import ZipLimits
from tests.core.docstore._scripted_sandbox import ScriptedSandbox
from tests.core.docstore._scripted_sandbox import tried as scripted_tried

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.machine() not in ("x86_64", "aarch64"),
    reason="the filter is built for Linux on x86-64 and AArch64",
)

LIMITS = SandboxLimits(cpu_seconds=30, wall_seconds=60.0)
REFUSED = ("EPERM", "ENOSYS")

_SERVER = textwrap.dedent(
    """
    import ctypes, errno, json, os, socket, subprocess, sys, threading
    from esra.core._docstore import _sandbox_server

    readers, missing = _sandbox_server._readers()
    real_pdf = readers["pdf"]
    inherited = socket.socket(socket.AF_INET, socket.SOCK_STREAM)  # made before any child

    def outcome(attempt):
        try:
            attempt()
        except OSError as exc:
            return errno.errorcode.get(exc.errno, str(exc.errno))
        return "done"

    def raw(number, *args):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.syscall(number, *args) == -1:
            raise OSError(ctypes.get_errno(), "refused")

    def started_thread():
        ran = []
        thread = threading.Thread(target=lambda: ran.append(True))
        thread.start()
        thread.join()
        if not ran:
            raise OSError(errno.EIO, "the thread did not run")

    def open_flags(path, flags):
        return lambda: os.close(os.open(path, flags, 0o600))

    def attempts(plan):
        port, directory, server, numbers = (
            plan["port"], plan["directory"], plan["server"], plan["numbers"]
        )
        existing = os.path.join(directory, "existing")
        return {
            "socket": lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close(),
            "socketpair": lambda: socket.socketpair(),
            "connect": lambda: inherited.connect(("127.0.0.1", port)),
            "execve": lambda: os.execv("/bin/true", ["/bin/true"]),
            "subprocess": lambda: subprocess.run(["/bin/true"], check=True),
            "fork": lambda: os.fork() == 0 and os._exit(0),
            "write a new file": open_flags(os.path.join(directory, "new"), os.O_CREAT),
            "open for writing": open_flags(existing, os.O_WRONLY),
            "open for reading and writing": open_flags(existing, os.O_RDWR),
            "truncate on open": open_flags(existing, os.O_RDONLY | os.O_TRUNC),
            "unlink": lambda: os.unlink(existing),
            "rename": lambda: os.rename(existing, os.path.join(directory, "renamed")),
            "mkdir": lambda: os.mkdir(os.path.join(directory, "made")),
            "chmod": lambda: os.chmod(existing, 0o777),
            "kill the server": lambda: os.kill(server, 0),
            "openat2": lambda: raw(numbers["openat2"], -100, existing.encode(), None, 0),
            "clone3": lambda: raw(numbers["clone3"], None, 0),
            "ptrace": lambda: raw(numbers["ptrace"], 0, 0, 0, 0),
            "unshare": lambda: raw(numbers["unshare"], 0x10000000),  # CLONE_NEWUSER
            # What a lazy import reads (any other file: test_sandbox_containment_files).
            "read a file": lambda: open(os.__file__, "rb").read(),
            "start a thread": started_thread,
            "signal itself": lambda: os.kill(os.getpid(), 0),
        }

    def trying(data, chars, options):
        if not data.startswith(b"TRY "):
            return real_pdf(data, chars, options)
        tried = {name: outcome(attempt) for name, attempt in attempts(json.loads(data[4:])).items()}
        return {"pages": [json.dumps(tried)]}

    readers["pdf"] = trying
    _sandbox_server._readers = lambda: (readers, missing)
    _sandbox_server.main()
    """
)


class _TryingSandbox(ScriptedSandbox):
    """One real sandbox server whose PDF reader tries, for documents marked ``TRY``, what a
    child must not do."""

    def __init__(self) -> None:
        super().__init__(_SERVER)


@contextlib.contextmanager
def _listening() -> Iterator[socket.socket]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        listener.setblocking(False)
        yield listener


def test_a_child_is_refused_the_network_programs_processes_and_writes(tmp_path: Path) -> None:
    existing = tmp_path / "existing"
    existing.write_bytes(b"kept as it is")
    machine = platform.machine()
    numbers = {
        name: _seccomp._NUMBERS[name][0 if machine == "x86_64" else 1]
        for name in ("openat2", "clone3", "ptrace", "unshare")
    }
    with _listening() as listener, _TryingSandbox() as served:
        server = served.server_pid
        tried = scripted_tried(
            served,
            {
                "port": listener.getsockname()[1],
                "directory": str(tmp_path),
                "server": server if server is not None else os.getpid(),
                "numbers": numbers,
            },
        )
        with pytest.raises(BlockingIOError):
            listener.accept()  # no connection reached it
    for name in (
        "socket",
        "socketpair",
        "connect",
        "execve",
        "subprocess",
        "fork",
        "write a new file",
        "open for writing",
        "open for reading and writing",
        "truncate on open",
        "unlink",
        "rename",
        "mkdir",
        "chmod",
        "kill the server",
        "openat2",
        "clone3",
        "ptrace",
        "unshare",
    ):
        assert tried[name] in REFUSED, (name, tried[name])
    assert (tried["openat2"], tried["clone3"]) == ("ENOSYS", "ENOSYS")
    # What a reader needs still works.
    assert tried["read a file"] == "done"
    assert tried["start a thread"] == "done"
    assert tried["signal itself"] == "done"
    assert existing.read_bytes() == b"kept as it is"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["existing"]


def test_a_child_cannot_signal_its_server() -> None:
    """The server ignores the stop signals, but not SIGKILL: a child may not send it."""
    with _listening() as listener, _TryingSandbox() as served:
        first = served.extract(text_pdf(["first"]), LIMITS, reader=DocumentFormat.PDF)
        assert first["pages"] == ["first"]
        server = served.server_pid
        assert server is not None
        tried = scripted_tried(
            served,
            {
                "port": listener.getsockname()[1],
                "directory": "/nonexistent",
                "server": server,
                "numbers": {"openat2": 0, "clone3": 0, "ptrace": 0, "unshare": 0},
            },
        )
        assert tried["kill the server"] == "EPERM"
        assert served.server_pid == server  # the same server, alive, serves on
        again = served.extract(text_pdf(["again"]), LIMITS, reader=DocumentFormat.PDF)
        assert again["pages"] == ["again"]


def _docx(heading: str, paragraph: str) -> bytes:
    from docx import Document

    document = Document()
    document.add_heading(heading, level=1)
    document.add_paragraph(paragraph)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def test_the_filter_refuses_nothing_a_real_pdf_or_docx_needs() -> None:
    """The real readers, in filtered children of the real server, read what they read in
    this process, unfiltered."""
    from esra.core._docstore._docx_worker import extract_docx
    from esra.core._docstore._pdf_worker import extract_pages

    pdf = text_pdf(["one page", "another page"])
    docx = _docx("Leave", "Employees get 28 days.")
    options = {"segments": 100, "zip": attrs.asdict(ZipLimits())}
    with ExtractionSandbox(max_servers=1) as served:
        read_pdf = served.extract(pdf, LIMITS, reader=DocumentFormat.PDF)
        read_docx = served.extract(docx, LIMITS, reader=DocumentFormat.DOCX, options=options)
    # The readers run only in a child, and the PDF one silences logging for the whole
    # process it runs in: read here, this test process gets its logging back after.
    silenced = logging.root.manager.disable
    try:
        in_process_pdf = extract_pages(pdf, LIMITS.max_chars)
        in_process_docx = extract_docx(docx, LIMITS.max_chars, options)
    finally:
        logging.disable(silenced)
    assert {key: read_pdf[key] for key in in_process_pdf} == in_process_pdf
    assert {key: read_docx[key] for key in in_process_docx} == in_process_docx
    assert in_process_pdf["pages"] == ["one page", "another page"]
    assert in_process_docx["labels"] == ["Leave"]


@pytest.mark.parametrize(
    ("column", "header"),
    [
        (0, "/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
        (1, "/usr/include/asm-generic/unistd.h"),  # AArch64's table
    ],
)
def test_the_filters_system_call_numbers_are_the_kernels(column: int, header: str) -> None:
    """The numbers the filter refuses by are the kernel headers' (where they are installed;
    a call newer than the headers is left out of the check)."""
    path = Path(header)
    if not path.exists():
        pytest.skip(f"{header} is not installed")
    defined: dict[str, int] = {}
    for name, number in re.findall(r"#define __NR(?:3264)?_(\w+)\s+(\d+)", path.read_text()):
        defined.setdefault(name, int(number))
    ours = {name: pair[column] for name, pair in _seccomp._NUMBERS.items()}
    known = {name: number for name, number in ours.items() if name in defined or number is None}
    assert known == {name: defined.get(name) for name in known}
    assert len(known) >= len(ours) - 1  # at most fchmodat2 (Linux 6.6) is newer
