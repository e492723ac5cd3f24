"""A sandbox child cannot find an earlier request's document or text in its own memory.

Documents of different tenants pass through one sandbox server, one after another, and each
child is forked with the server's whole address space. Memory the server freed is not
cleared: a buffer that held tenant A's bytes, or the string its answer was decoded into,
stays readable, and the child forked for tenant B's document — a parser a hostile file has
taken over — could read A's document or text there. The server now keeps no earlier
request's content where a later child can read it.

The server here is the real one (``main``, started as the owner starts it), with a reader
that echoes a marker document as a marked text, and one that scans its own process memory
(``/proc/self/maps`` and ``/proc/self/mem``) for those markers. The scanner is told the
markers in a scattered form, so that neither marker is ever whole in its memory unless the
server leaked it; it also looks for a marker of its own document, which must be found, so
that a scan finding nothing is a scan that works.
"""

from __future__ import annotations

import os
import secrets
import textwrap

import pytest

from esra.core._docstore.formats import DocumentFormat
from esra.core._docstore.sandbox import SandboxLimits
from tests.core.docstore._scripted_sandbox import ScriptedSandbox

pytestmark = pytest.mark.skipif(
    not os.path.exists("/proc/self/mem"), reason="the child reads its memory through /proc"
)

# Well past every size the test uses; the scan of a child's whole memory takes a while.
LIMITS = SandboxLimits(cpu_seconds=120, wall_seconds=300.0, max_chars=1 << 24)

_SERVER = textwrap.dedent(
    """
    import re
    from esra.core._docstore import _sandbox_server

    readers, missing = _sandbox_server._readers()

    def echo(data):
        # "ECHO <size> <token>": a document of <size> bytes repeating DOC-<token>, whose
        # text is as long, repeating TXT-<token> (built here: never whole in the document).
        _, size, token = data[:200].split(b" ")[:3]
        text = ("TXT-" + token.decode() + " ") * (int(size) // (len(token) + 5) + 1)
        return {"pages": [text[: int(size)]]}

    def scattered(parts):
        # A pattern for the marker whose characters are ``parts`` (never joined here).
        return re.compile(b"(?:)".join(re.escape(part) for part in parts))

    def scan(data):
        # "SCAN o.w.n t.o.k.e.n SELF-<own>": whether SELF-<own> (whole in this document),
        # DOC-<token> and TXT-<token> are found in this process's memory.
        _, own, token, _whole = data.split(b" ")
        own, token = own.split(b"."), token.split(b".")
        wanted = {
            "self": scattered([b"S", b"E", b"L", b"F", b"-", *own]),
            "document": scattered([b"D", b"O", b"C", b"-", *token]),
            "text": scattered([b"T", b"X", b"T", b"-", *token]),
        }
        found = dict.fromkeys(wanted, False)
        chunk, overlap = bytearray(1 << 20), 64
        with open("/proc/self/maps", "rb") as maps, open("/proc/self/mem", "rb", 0) as mem:
            regions = [line.split() for line in maps.read().splitlines()]
            for region in regions:
                if not region[1].startswith(b"r") or region[-1] in (b"[vvar]", b"[vsyscall]"):
                    continue
                start, end = (int(bound, 16) for bound in region[0].split(b"-"))
                while start < end:
                    size = min(len(chunk), end - start)
                    try:
                        mem.seek(start)
                        got = mem.readinto(memoryview(chunk)[:size])
                    except OSError:
                        break
                    if not got:
                        break
                    view = memoryview(chunk)[:got]
                    for name, pattern in wanted.items():
                        found[name] = found[name] or pattern.search(view) is not None
                    start += max(got - overlap, 1) if got == size and start + got < end else got
        return {"pages": [" ".join(f"{name}:{hit}" for name, hit in found.items())]}

    def marked(data, chars, options):
        if data.startswith(b"ECHO "):
            return echo(data)
        if data.startswith(b"SCAN "):
            return scan(data)
        return {"refusal": "MALFORMED_DOCUMENT", "detail": "not a test document"}

    readers["pdf"] = marked
    _sandbox_server._readers = lambda: (readers, missing)
    # The scan reads the child's memory through /proc, which the file restriction refuses; a
    # hostile child reads its own memory directly, so this changes nothing of what is tested.
    _sandbox_server._landlock.confine = lambda ruleset: False
    _sandbox_server.main()
    """
)


class _MarkerSandbox(ScriptedSandbox):
    """One real sandbox server (every request is served by the same one), with the marker
    readers above."""

    def __init__(self) -> None:
        super().__init__(_SERVER)

    def read(self, document: bytes) -> str:
        answer = self.extract(document, LIMITS, reader=DocumentFormat.PDF)
        assert "refusal" not in answer, answer
        pages = answer["pages"]
        assert isinstance(pages, list)
        (page,) = pages
        assert isinstance(page, str)
        return page


def _echo_document(size: int, token: str) -> bytes:
    """A document of ``size`` bytes (at least the header's) repeating ``DOC-<token>``."""
    head = f"ECHO {size} {token} ".encode()
    body = f"DOC-{token} ".encode() * (size // (len(token) + 5) + 1)
    return (head + body)[: max(size, len(head) + len(token) + 5)]


def _scan_document(own: str, token: str) -> bytes:
    return f"SCAN {'.'.join(own)} {'.'.join(token)} SELF-{own}".encode()


@pytest.mark.parametrize(
    "size",
    [
        pytest.param(2 << 10, id="small, on the malloc heap"),
        pytest.param(1 << 20, id="large, mmap-sized"),
        pytest.param(6 << 20, id="larger than the buffers the server reads with"),
    ],
)
def test_the_next_child_finds_no_earlier_document_or_text_in_its_memory(size: int) -> None:
    token, own = secrets.token_hex(12), secrets.token_hex(12)
    with _MarkerSandbox() as served:
        echoed = served.read(_echo_document(size, token))
        assert f"TXT-{token} " in echoed
        assert served.server_pid is not None
        found = served.read(_scan_document(own, token))
    assert found == "self:True document:False text:False"


def test_no_earlier_content_survives_several_requests_of_every_size() -> None:
    """Documents of several sizes one after another (the buffers the server reuses grow and
    shrink): none of them is left for the last child."""
    tokens = [secrets.token_hex(12) for _ in range(4)]
    own = secrets.token_hex(12)
    with _MarkerSandbox() as served:
        for size, token in zip([6 << 20, 3 << 10, 300 << 10, 100], tokens, strict=True):
            served.read(_echo_document(size, token))
        for token in tokens:
            found = served.read(_scan_document(own, token))
            assert found == "self:True document:False text:False", token
