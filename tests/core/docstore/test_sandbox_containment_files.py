"""A sandbox child may read only what Python needs: no secret, no other tenant's data.

The seccomp filter (``test_sandbox_containment_syscalls``) keeps a child taken over by its
document from sending anything anywhere but its answer — but its answer lands in the
tenant's store, searchable. So a child that could read what the worker's user reads could
answer with ``/proc/<worker>/environ`` (the host's database passwords and key-encryption
keys), the embedded default's ``state.db`` (every tenant's documents) or any configuration
file. Each child now restricts itself with Landlock (``_landlock``) before it reads its
document: it may read beneath the interpreter's library directories, the import path and
the directories of the shared libraries the server loaded, and nothing else.

The server here is the real one (``main``, started as the owner starts it), with a PDF
reader that tries, for documents marked ``TRY``, each read in its child and reports how it
ended.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
import textwrap
from pathlib import Path

import pytest

from esra.core._docstore import sandbox
from esra.core._docstore._text_pdf import text_pdf
from esra.core._docstore.formats import DocumentFormat
from esra.core._docstore.sandbox import ExtractionSandbox, SandboxLimits
from tests.core.docstore._scripted_sandbox import ScriptedSandbox, tried


def _landlock_abi() -> int:
    """The kernel's Landlock ABI, asked here rather than of the module under test (0: none)."""
    if not sys.platform.startswith("linux"):
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    create_ruleset, version = 444, 1  # the same number on every architecture
    answer = int(libc.syscall(create_ruleset, None, ctypes.c_size_t(0), ctypes.c_uint(version)))
    return max(answer, 0)


pytestmark = pytest.mark.skipif(
    _landlock_abi() < 1,
    reason="this kernel has no Landlock (Linux 5.13 or later, enabled at boot): children "
    "run without the file restriction here, and the owner is warned",
)

LIMITS = SandboxLimits(cpu_seconds=30, wall_seconds=60.0)
REFUSED = ("EACCES", "EPERM")
SECRET = b"every tenant's documents"

_SERVER = textwrap.dedent(
    """
    import errno, json, os, sys
    from esra.core._docstore import _sandbox_server

    readers, missing = _sandbox_server._readers()
    real_pdf = readers["pdf"]

    def outcome(attempt):
        try:
            answer = attempt()
        except OSError as exc:
            return errno.errorcode.get(exc.errno, str(exc.errno))
        except ImportError as exc:
            return f"ImportError: {exc}"
        return answer if isinstance(answer, str) else "done"

    def read(path):
        with open(path, "rb") as opened:
            return opened.read().decode(errors="replace")

    def imported(name):
        return lambda: __import__(name) and None

    def attempts(plan):
        directory, owner = plan["directory"], plan["owner"]
        return {
            "the server's environment": lambda: read(f"/proc/{os.getppid()}/environ"),
            "the owner's environment": lambda: read(f"/proc/{owner}/environ"),
            "its own environment": lambda: read("/proc/self/environ"),
            "its own memory map": lambda: read("/proc/self/maps"),
            "the state database": lambda: read(os.path.join(directory, "state.db")),
            "the state directory": lambda: os.listdir(directory),
            "a file in the working directory": lambda: read("state.db"),
            "the working directory": lambda: os.listdir("."),
            "the password file": lambda: read("/etc/passwd"),
            "the host name": lambda: read("/etc/hostname"),
            "the root directory": lambda: os.listdir("/"),
            "a temporary directory": lambda: os.listdir("/tmp"),
            "a stdlib source": lambda: read(os.__file__) and None,
            "a stdlib module not imported yet": imported("colorsys"),
            "an extension module not loaded yet": imported("_csv"),
            "an extension module with a library not loaded yet": imported("_sqlite3"),
        }

    def trying(data, chars, options):
        if not data.startswith(b"TRY "):
            return real_pdf(data, chars, options)
        plan = json.loads(data[4:])
        tried = {name: outcome(attempt) for name, attempt in attempts(plan).items()}
        return {"pages": [json.dumps(tried)]}

    readers["pdf"] = trying
    _sandbox_server._readers = lambda: (readers, missing)
    if sys.argv[1:] == ["absolute"]:
        # As ``python -m`` starts the deployed server: the working directory, absolute,
        # first on the import path.
        sys.path.insert(0, os.getcwd())
    _sandbox_server.main()
    """
)


def _tried_in(directory: Path, *arguments: str) -> tuple[dict[str, str], list[object]]:
    """What a child of a server started in ``directory`` reported trying, and the pages of
    a real document read by the same server's next child."""
    with ScriptedSandbox(_SERVER, *arguments, cwd=directory) as served:
        outcomes = tried(served, {"directory": str(directory), "owner": os.getpid()})
        again = served.extract(text_pdf(["again"]), LIMITS, reader=DocumentFormat.PDF)
    pages = again["pages"]
    assert isinstance(pages, list)
    return outcomes, pages


@pytest.fixture
def state_directory(tmp_path: Path) -> Path:
    """A fresh directory standing in for the embedded default's data directory."""
    directory = tmp_path / "state"
    directory.mkdir()
    (directory / "state.db").write_bytes(SECRET)
    return directory


@pytest.mark.parametrize("import_path", ["relative", "absolute"])
def test_a_child_reads_no_secret_and_no_tenants_data(
    state_directory: Path, import_path: str
) -> None:
    """Even with the server started in the data directory, which ``python -m`` (and ``-c``)
    put first on the import path."""
    outcomes, again = _tried_in(state_directory, import_path)
    for name in (
        "the server's environment",
        "the owner's environment",
        "its own environment",
        "its own memory map",
        "the state database",
        "the state directory",
        "a file in the working directory",
        "the working directory",
        "the password file",
        "the root directory",
        "a temporary directory",
    ):
        assert outcomes[name] in REFUSED, (name, outcomes[name])
    if Path("/etc/hostname").exists():
        assert outcomes["the host name"] in REFUSED, outcomes["the host name"]
    assert not any(SECRET.decode() in outcome for outcome in outcomes.values())
    # What a reader needs still works: reading and importing what Python brings.
    assert outcomes["a stdlib source"] == "done"
    assert outcomes["a stdlib module not imported yet"] == "done"
    assert outcomes["an extension module not loaded yet"] == "done"
    assert outcomes["an extension module with a library not loaded yet"] == "done"
    # The same server's next child, of a real document, reads it as ever.
    assert again == ["again"]


def test_the_real_server_started_in_the_data_directory_extracts(
    state_directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The deployed server (``python -m``, its working directory first on its import path)
    starts there, restricts its children, and they read PDFs as ever."""
    monkeypatch.chdir(state_directory)  # the owner's working directory is the server's
    with ExtractionSandbox(max_servers=1) as served:
        answer = served.extract(text_pdf(["one", "two"]), LIMITS, reader=DocumentFormat.PDF)
    assert answer["pages"] == ["one", "two"]


_UNRESTRICTED_SERVER = textwrap.dedent(
    """
    from esra.core._docstore import _landlock, _sandbox_server

    _landlock.abi = lambda: 0  # as on a kernel without Landlock
    _sandbox_server.main()
    """
)


def test_without_landlock_children_still_extract_and_the_server_says_what_is_missing() -> None:
    with ScriptedSandbox(_UNRESTRICTED_SERVER, any_announcement=True) as served:
        answer = served.extract(text_pdf(["read"]), LIMITS, reader=DocumentFormat.PDF)
        announced = served.announced
    assert answer["pages"] == ["read"]
    assert announced is not None
    assert announced.get("ready") is True
    missing = announced.get("unfiltered")
    assert isinstance(missing, str)
    assert "Landlock" in missing
    assert "system-call filter" not in missing  # that one is there


def test_the_owner_names_the_missing_containment(caplog: pytest.LogCaptureFixture) -> None:
    reason = "Landlock file restriction (the kernel has no Landlock: ENOSYS)"
    sandbox._warn_unfiltered.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger=sandbox.__name__):
            sandbox._warn_unfiltered(reason)
            sandbox._warn_unfiltered(reason)  # once per reason
    finally:
        sandbox._warn_unfiltered.cache_clear()
    warnings = [record.getMessage() for record in caplog.records]
    assert len(warnings) == 1
    assert reason in warnings[0]
    assert "without a system-call filter" not in warnings[0]
