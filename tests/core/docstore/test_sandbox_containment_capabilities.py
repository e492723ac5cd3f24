"""A sandbox child holds no Linux capability, whoever its server runs as.

In a container the worker, and so the sandbox server, often runs as root, and a child forked
from it inherits root's capabilities: ``CAP_DAC_READ_SEARCH`` opens a file by handle
(``open_by_handle_at``) with no path for the file restriction to see, ``CAP_SYS_PTRACE`` and
``CAP_KILL`` reach other users' processes. Parsing a document needs none of them, so each
child drops them all (``_capabilities``) before it reads. The server here is the real one,
with a PDF reader that reports, for documents marked ``ASK``, what its child holds.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap

import pytest

from esra.core._docstore._text_pdf import text_pdf
from esra.core._docstore.formats import DocumentFormat
from esra.core._docstore.sandbox import SandboxLimits
from tests.core.docstore._scripted_sandbox import ScriptedSandbox

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux capabilities"),
    pytest.mark.skipif(
        os.geteuid() != 0,
        reason="run as a user without capabilities, the server's children have none to drop",
    ),
]

LIMITS = SandboxLimits(cpu_seconds=30, wall_seconds=60.0)

_SERVER = textwrap.dedent(
    """
    import ctypes, json
    from esra.core._docstore import _sandbox_server

    readers, missing = _sandbox_server._readers()
    real_pdf = readers["pdf"]

    class Header(ctypes.Structure):
        _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))

    class Data(ctypes.Structure):
        _fields_ = tuple((name, ctypes.c_uint32) for name in ("eff", "prm", "inh"))

    def held():
        header, data = Header(0x20080522, 0), (Data * 2)()
        assert ctypes.CDLL(None).capget(ctypes.byref(header), data) == 0
        names = ("eff", "prm", "inh")
        return {name: getattr(data[0], name) | getattr(data[1], name) << 32 for name in names}

    def asking(data, chars, options):
        if data != b"ASK":
            return real_pdf(data, chars, options)
        return {"pages": [json.dumps(held())]}

    readers["pdf"] = asking
    _sandbox_server._readers = lambda: (readers, missing)
    _sandbox_server.main()
    """
)


def test_a_root_servers_child_holds_no_capability() -> None:
    with ScriptedSandbox(_SERVER) as served:
        answer = served.extract(b"ASK", LIMITS, reader=DocumentFormat.PDF)
        # The same server's next child reads a real document as ever.
        again = served.extract(text_pdf(["again"]), LIMITS, reader=DocumentFormat.PDF)
    pages = answer["pages"]
    assert isinstance(pages, list)
    assert json.loads(pages[0]) == {"eff": 0, "prm": 0, "inh": 0}
    assert again["pages"] == ["again"]
