"""The sandbox server outlives a stop signal sent to the worker's whole process group.

Ctrl-C in a terminal signals the foreground process group, and ``systemctl stop`` (by
default) every process of the unit: the sandbox server and the child extracting a document
got the worker's SIGINT or SIGTERM too, and died with it. The worker, which was finishing the
document in hand as asked, then failed it for good as ``MALFORMED_DOCUMENT`` ("sandbox server
died") — a restart surfacing as a broken document. The server's lifetime is its owner's: it
ends when its input closes (or is killed by the owner), never by the group's signal.
"""

from __future__ import annotations

import os
import signal

import pytest

from esra.core._docstore._text_pdf import text_pdf
from esra.core._docstore.formats import DocumentFormat
from esra.core._docstore.sandbox import ExtractionSandbox, SandboxLimits

PDF = text_pdf(["still here"])


def _ignored(pid: int) -> int:
    """The signals ``pid`` ignores, as a bit mask (bit n-1 for signal n)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("SigIgn:"):
                return int(line.split()[1], 16)
    raise AssertionError("no SigIgn line")


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads /proc")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_the_sandbox_server_ignores_the_groups_stop_signal(signum: signal.Signals) -> None:
    with ExtractionSandbox(max_servers=1) as sandbox:
        first = sandbox.extract(PDF, SandboxLimits(), reader=DocumentFormat.PDF)
        assert first.get("pages") == ["still here"]
        pid = sandbox.server_pid
        assert pid is not None
        assert _ignored(pid) & (1 << (signum - 1))
        os.kill(pid, signum)
        answer = sandbox.extract(PDF, SandboxLimits(), reader=DocumentFormat.PDF)
        assert answer.get("pages") == ["still here"]
        assert sandbox.server_pid == pid  # the same server answered: it was never restarted
