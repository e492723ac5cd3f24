"""A sandbox child never dumps core: its memory holds a tenant's document.

A child that exhausts its CPU limit dies by SIGXCPU, and one that crashes its reader by
SIGSEGV; both dump core by default wherever the host lets them (a file beside the worker,
systemd-coredump, apport), writing the document's bytes and text to disk outside the store.
"""

from __future__ import annotations

import json
import os
import resource
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from esra.core._docstore import _sandbox_server
from esra.core._docstore._text_pdf import text_pdf
from esra.core._docstore.formats import DocumentFormat
from esra.core._docstore.sandbox import ExtractionSandbox, SandboxLimits


@pytest.fixture
def core_dumps_allowed() -> Iterator[None]:
    """Lift this process's core size limit (children inherit it), as a host may.

    Where the hard limit is already 0 nothing can lift it, nothing dumps core whatever the
    sandbox does, and a check of the sandbox's own limit could not fail: it is skipped
    there, and runs wherever cores are possible (this project's CI machines).
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
    if hard == 0:
        pytest.skip("the hard core limit is 0 here: no core is possible, nothing to show")
    resource.setrlimit(resource.RLIMIT_CORE, (hard, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_CORE, (soft, hard))


def _core_limit(_data: bytes, _chars: int, _options: Mapping[str, Any]) -> dict[str, object]:
    return {"core": list(resource.getrlimit(resource.RLIMIT_CORE))}


@pytest.mark.usefixtures("core_dumps_allowed")
def test_a_sandbox_child_may_not_dump_core() -> None:
    header = {"memory": 768 * 1024 * 1024, "cpu": 30, "wall": 30.0, "chars": 1 << 20}
    answer = _sandbox_server._Scrubbed()
    assert _sandbox_server._serve_one(_core_limit, header, b"", answer, confine=True) is None
    assert json.loads(bytes(answer.view())) == {"core": [0, 0]}


def _core_file_limit(pid: int) -> str:
    with open(f"/proc/{pid}/limits", encoding="ascii") as limits:
        for line in limits:
            if line.startswith("Max core file size"):
                return line.split()[4]  # the soft limit
    raise AssertionError("no core file size limit")


@pytest.mark.skipif(not os.path.exists("/proc/self/limits"), reason="reads /proc")
@pytest.mark.usefixtures("core_dumps_allowed")
def test_the_sandbox_server_may_not_dump_core() -> None:
    """The server holds every request's bytes while it reads and relays them."""
    with ExtractionSandbox(max_servers=1) as sandbox:
        answer = sandbox.extract(text_pdf(["x"]), SandboxLimits(), reader=DocumentFormat.PDF)
        assert answer.get("pages") == ["x"]
        pid = sandbox.server_pid
        assert pid is not None
        assert _core_file_limit(pid) == "0"
