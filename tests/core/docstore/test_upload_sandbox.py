"""Upload inspection's package checks run in the extraction sandbox, not the upload process.

A ``.docx`` was inflated and its XML parsed in the process serving the upload, bounded only
by the zip guard and the element cap, and those bound the bytes, not the cost: within them
(measured in that process) 4 Mi nested elements took 5.7 s of CPU and 540 MB, a root of
distinct namespaces 13 s and 1 GB, 12 M distinct attributes 52 s and 2 GB, and a
zip bomb at the guard's limits holds 128 MiB of members. The checks now run in a forked
sandbox child under ``UploadLimits.sandbox``: a package that exhausts it fails alone, as
``MALFORMED_DOCUMENT``, and every other package gets the code it got in the process.
"""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from esra.core._docstore.formats import DocumentFormat
from esra.core._docstore.ingestion import upload_files
from esra.core._docstore.model import DocumentState
from esra.core._docstore.ooxml import check_docx_members
from esra.core._docstore.refusals import STORED_BREACHES, Breach, DocumentRefusedError
from esra.core._docstore.sandbox import ExtractionSandbox, SandboxLimits
from esra.core._docstore.upload import UploadLimits, inspect_upload
from esra.core._docstore.zipguard import ZipLimits, inflate_members
from esra.core.codes import DocumentRefusal
from esra.core.testing import FakeClock
from esra.core.testing._docstore import InMemoryDocumentRepository
from tests._external import shared_data

W = b'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
EMPTY = b"<w:document " + W + b"/>"
MIB = 1 << 20
GOOD = b"Employees receive 28 days of paid leave per year.\n"


def _zip(entries: list[tuple[str, bytes]], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=compression) as archive:
        for name, data in entries:
            archive.writestr(name, data)
    return buffer.getvalue()


def _docx(
    document_xml: bytes = EMPTY,
    *extra: tuple[str, bytes],
    compression: int = zipfile.ZIP_DEFLATED,
) -> bytes:
    parts = [("[Content_Types].xml", b"<Types/>"), ("word/document.xml", document_xml)]
    return _zip([*parts, *extra], compression)


def _letters(count: int, alphabet: bytes = b"abcdefghijklmnopqrstuvwxyz") -> bytes:
    """``count`` random letters: deflate keeps well above the 0.01 ratio limit."""
    return os.urandom(count).translate(bytes(alphabet[i % len(alphabet)] for i in range(256)))


def _nested(depth: int) -> bytes:
    """``depth`` elements, each inside the one before (random one-letter names)."""
    names = _letters(depth)
    opening = bytearray(3 * depth)
    opening[0::3], opening[1::3], opening[2::3] = b"<" * depth, names, b">" * depth
    closing = bytearray(4 * depth)
    closing[0::4], closing[1::4] = b"<" * depth, b"/" * depth
    closing[2::4], closing[3::4] = names[::-1], b">" * depth
    return b"<w:document " + W + b">" + opening + closing + b"</w:document>"


def _flood(elements: int) -> bytes:
    """``elements`` empty sibling elements (``<a/>``, random one-letter names)."""
    body = bytearray(4 * elements)
    body[0::4], body[1::4] = b"<" * elements, _letters(elements)
    body[2::4], body[3::4] = b"/" * elements, b">" * elements
    return b"<w:document " + W + b">" + body + b"</w:document>"


def _namespaces(count: int) -> bytes:
    """A root declaring ``count`` namespaces, and one child element in each."""
    declared = b"".join(b' xmlns:n%d="urn:n%d"' % (i, i) for i in range(count))
    children = b"".join(b"<n%d:e/>" % i for i in range(count))
    return b"<w:document " + W + declared + b">" + children + b"</w:document>"


def _attributes(count: int) -> bytes:
    """One element of ``count`` distinct empty attributes (attributes are not elements)."""
    return b"<w:document " + W + b"".join(b' a%d=""' % i for i in range(count)) + b"/>"


def _central(data: bytes, name: str, field: str, value: int) -> bytes:
    """``data`` with one field of ``name``'s central directory record replaced: the archive
    the directory describes is no longer the one its local headers and data hold."""
    offset = {"compress_size": 20, "file_size": 24, "header_offset": 42}[field]
    record = data.rfind(b"PK\x01\x02", 0, data.rfind(name.encode()))
    patched = bytearray(data)
    struct.pack_into("<I", patched, record + offset, value)
    return bytes(patched)


def _outcome(data: bytes, limits: UploadLimits | None = None) -> str:
    """What an upload of ``data`` as a .docx gets: accepted, accepted as a breach (stored
    Failed), or refused with its reason (and breach, when it names one)."""
    try:
        accepted = inspect_upload("report.docx", data, limits)
    except DocumentRefusedError as refused:
        breach = refused.breach.value if refused.breach is not None else "-"
        return f"refused {refused.refusal.value} {breach}"
    return f"breach {accepted.breach.value}" if accepted.breach is not None else "accepted"


_TEN = ZipLimits(max_entries=10)
_MEDIA = _docx(EMPTY, ("word/media/a.bin", bytes(MIB)))
_NOISE = os.urandom(300_000)
_BOMB = _docx(
    EMPTY,
    ("word/media/a.bin", _NOISE),
    ("word/media/b.bin", _NOISE),
    compression=zipfile.ZIP_STORED,
)
_BOMB_LIMITS = ZipLimits(max_entry_bytes=300_000, max_total_bytes=600_500)


# The codes these uploads got while the checks ran in the upload process, written down
# before they moved: the sandbox must give each the same.
@pytest.mark.parametrize(
    ("data", "zip_limits", "expected"),
    [
        pytest.param(
            _docx(EMPTY, *[(f"word/p{i}.xml", b"<p/>") for i in range(8)]),
            _TEN,
            "accepted",
            id="entries-at-the-cap",
        ),
        pytest.param(
            _docx(EMPTY, *[(f"word/p{i}.xml", b"<p/>") for i in range(9)]),
            _TEN,
            "breach zip_entry_count",
            id="entries-past-the-cap",
        ),
        pytest.param(
            _docx(_nested(100_000), compression=zipfile.ZIP_STORED),
            None,
            "accepted",
            id="deep-nesting",
        ),
        pytest.param(
            _docx(
                b"<w:document " + W + b">" + b"<a>" * 100_000 + b"</a>" * 100_000 + b"</w:document>"
            ),
            None,
            "breach zip_compression_ratio",
            id="deep-nesting-deflated",
        ),
        pytest.param(
            _docx(b"<w:document " + W + b' v="' + _letters(4 * MIB) + b'"/>'),
            None,
            "accepted",
            id="huge-attribute-value",
        ),
        pytest.param(_docx(_namespaces(10_000)), None, "accepted", id="many-namespaces"),
        pytest.param(_docx(_attributes(100_000)), None, "accepted", id="many-attributes"),
        pytest.param(_docx(_flood(200_000)), None, "accepted", id="element-flood"),
        pytest.param(_BOMB, _BOMB_LIMITS, "accepted", id="bomb-at-the-limits"),
        pytest.param(
            _BOMB,
            ZipLimits(max_entry_bytes=300_000, max_total_bytes=599_999),
            "breach zip_inflated_size",
            id="bomb-one-byte-past",
        ),
        pytest.param(
            _central(_MEDIA, "word/media/a.bin", "file_size", 10),
            None,
            "refused MALFORMED_DOCUMENT -",
            id="directory-understates-the-size",
        ),
        pytest.param(
            _central(_docx(), "word/document.xml", "file_size", 0xFFFF_FFF0),
            None,
            "breach zip_inflated_size",
            id="directory-overstates-the-size",
        ),
        pytest.param(
            _central(_MEDIA, "word/media/a.bin", "compress_size", 10),
            None,
            "refused MALFORMED_DOCUMENT -",
            id="directory-understates-the-compressed-size",
        ),
        pytest.param(
            _central(_docx(), "word/document.xml", "header_offset", 0),
            None,
            "breach zip_structure",
            id="directory-points-at-another-entry",
        ),
        pytest.param(
            _central(_docx(), "word/document.xml", "header_offset", MIB),
            None,
            "breach zip_structure",
            id="directory-points-past-the-end",
        ),
        pytest.param(
            _docx(b'<!DOCTYPE d [<!ENTITY x "y">]><d>&x;</d>'),
            None,
            "breach xml_dtd_or_entity",
            id="entity",
        ),
        pytest.param(_docx(b"<w:document"), None, "breach xml_invalid", id="damaged-xml"),
        pytest.param(
            _docx(EMPTY, ("word/vbaProject.bin", b"\x00")),
            None,
            "refused MACRO_ENABLED -",
            id="macro",
        ),
        pytest.param(
            _zip([("word/document.xml", EMPTY)]),
            None,
            "refused TYPE_MISMATCH -",
            id="not-a-word-package",
        ),
        pytest.param(b"PK\x03\x04" + bytes(40), None, "refused MALFORMED_DOCUMENT -", id="torn"),
    ],
)
def test_hostile_packages_keep_the_codes_they_got_in_the_upload_process(
    data: bytes, zip_limits: ZipLimits | None, expected: str
) -> None:
    """Within the caps, each worst case (the most entries, the deepest nesting, a huge
    attribute value, many namespaces or attributes, a bomb at the guard's limits, a central
    directory that lies) is classified as before; nothing is accepted partially."""
    limits = UploadLimits(zip=zip_limits) if zip_limits is not None else None
    assert _outcome(data, limits) == expected


@pytest.mark.external_data
def test_every_real_docx_gets_what_the_checks_give_in_process() -> None:
    """The corpus's packages (Word, and OOXML renamed .docx), each checked in a sandbox
    child and in this process: the same breach or refusal, file by file, and the same
    accepted upload (name, format, hash) for every valid one."""
    root = shared_data("documents")
    paths = sorted(p for p in root.rglob("*") if p.suffix.lower() in {".docx", ".ooxml", ".xlsx"})
    assert len(paths) > 60
    for path in paths:
        data = path.read_bytes()
        if not data.startswith(b"PK"):
            continue
        try:
            check_docx_members(inflate_members(data))
            expected = "accepted"
        except DocumentRefusedError as refused:
            stored = refused.breach in STORED_BREACHES
            expected = f"breach {refused.breach}" if stored else f"refused {refused.refusal}"
        try:
            accepted = inspect_upload("renamed.docx", data)
        except DocumentRefusedError as refused:
            actual = f"refused {refused.refusal}"
        else:
            assert (accepted.format, accepted.data) == (DocumentFormat.DOCX, data)
            assert accepted.display_name == "renamed.docx"
            actual = f"breach {accepted.breach}" if accepted.breach else "accepted"
        assert actual == expected, path


def _server(sandbox: ExtractionSandbox) -> int | None:
    return sandbox.server_pid  # read afresh (a local narrowing would outlive the call)


def test_only_a_docx_package_is_checked_in_the_sandbox() -> None:
    """Text and PDF uploads never start a sandbox server; a .docx is checked in a child of
    the one it is given, which outlives the child."""
    with ExtractionSandbox() as sandbox:
        for name, data in [("a.txt", GOOD), ("a.csv", b"a,b\n1,2\n"), ("a.pdf", b"%PDF-1.7\n")]:
            inspect_upload(name, data, sandbox=sandbox)
        assert _server(sandbox) is None
        assert inspect_upload("a.docx", _docx(), sandbox=sandbox).breach is None
        server = _server(sandbox)
        assert server is not None
        damaged = inspect_upload("c.docx", _docx(b"<w:document"), sandbox=sandbox)
        assert damaged.breach is Breach.XML_INVALID
        assert inspect_upload("b.docx", _docx(b"<d/>"), sandbox=sandbox).breach is None
        assert _server(sandbox) == server


@pytest.mark.parametrize(
    ("sandbox_limits", "data"),
    [
        # An address space far below the server's own: inflating a 2 MiB part fails at once.
        pytest.param(
            SandboxLimits(memory_bytes=16 * MIB),
            _docx(b"<w:document " + W + b' v="' + _letters(2 * MIB) + b'"/>'),
            id="memory-limit",
        ),
        # 2 Mi distinct attributes on one element (no cap counts attributes): about 7 s of CPU
        # to parse here, so a machine several times faster still spends its second first. The
        # address space is raised so the CPU limit, not memory, is the one spent.
        pytest.param(
            SandboxLimits(cpu_seconds=1, memory_bytes=2048 * MIB),
            _docx(_attributes(2 * MIB)),
            id="cpu-limit",
        ),
        # The same package under a CPU limit it never reaches: the wall clock stops it. (A
        # plain package under a 1 ms wall limit raced the clock: now and then its check
        # finished in time and it was accepted.)
        pytest.param(
            SandboxLimits(cpu_seconds=60, wall_seconds=0.5, memory_bytes=2048 * MIB),
            _docx(_attributes(2 * MIB)),
            id="wall-clock-limit",
        ),
    ],
)
async def test_a_package_past_a_sandbox_limit_fails_alone_classified(
    sandbox_limits: SandboxLimits, data: bytes
) -> None:
    """A package whose checks exhaust their child is refused as ``MALFORMED_DOCUMENT`` (the
    checks did not finish, so it is not stored); the upload goes on with the next file."""
    repository = InMemoryDocumentRepository()
    hostile, good = await upload_files(
        repository,
        "tenant-a",
        [("hostile.docx", data), ("good.txt", GOOD)],
        scope="all",
        clock=FakeClock(),
        limits=UploadLimits(sandbox=sandbox_limits),
    )
    assert (hostile.document, hostile.refusal) == (None, DocumentRefusal.MALFORMED_DOCUMENT)
    assert good.document is not None
    assert good.document.state is DocumentState.PENDING


_BOMB_SCRIPT = textwrap.dedent(
    """
    import json, resource, sys
    from pathlib import Path
    from esra.core._docstore.upload import inspect_upload
    data = Path(sys.argv[1]).read_bytes()
    # A plain package first (which starts the sandbox server, if inspection uses one), then
    # this process may grow by 64 MiB at most: half of what the bomb inflates to.
    first = inspect_upload("plain.docx", Path(sys.argv[2]).read_bytes())
    size = int(Path("/proc/self/statm").read_text().split()[0]) * resource.getpagesize()
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (size + (64 << 20), hard))
    bomb = inspect_upload("bomb.docx", data)
    print(json.dumps([first.breach, bomb.breach, bomb.sha256 == first.sha256]))
    """
)


def test_a_bomb_at_the_guards_limits_is_inflated_outside_the_upload_process(
    tmp_path: Path,
) -> None:
    """A 3.4 MB package of two 64 MiB members (within every zip limit, ratio just above
    0.01) is accepted, as before; it was inflated into the upload process, 128 MiB of
    members held at once (and the bigger one joined again), so under an address-space
    limit the upload died with an unclassified MemoryError. Its child holds them now."""
    member = bytearray(64 * MIB - 4096)
    member[::100] = os.urandom(len(range(0, len(member), 100)))
    bomb = _docx(EMPTY, ("word/media/a.bin", bytes(member)), ("word/media/b.bin", bytes(member)))
    assert len(bomb) < 4 * MIB
    assert _outcome(bomb) == "accepted"
    (tmp_path / "bomb.docx").write_bytes(bomb)
    (tmp_path / "plain.docx").write_bytes(_docx())
    completed = subprocess.run(  # noqa: S603 - our own interpreter and script
        [
            sys.executable,
            "-c",
            _BOMB_SCRIPT,
            str(tmp_path / "bomb.docx"),
            str(tmp_path / "plain.docx"),
        ],
        capture_output=True,
        timeout=300,
        check=False,
    )
    assert b"MemoryError" not in completed.stderr, completed.stderr.decode()[-2000:]
    assert completed.returncode == 0, completed.stderr.decode()[-2000:]
    assert json.loads(completed.stdout) == [None, None, False]


_OUT_OF_MEMORY_SCRIPT = textwrap.dedent(
    """
    import json, resource
    from pathlib import Path
    from esra.core._docstore.ooxml import check_docx_members
    from esra.core._docstore.refusals import DocumentRefusedError
    part = b'<d v="' + b"ab" * (16 << 20) + b'"/>'
    size = int(Path("/proc/self/statm").read_text().split()[0]) * resource.getpagesize()
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (size + (24 << 20), hard))
    try:
        check_docx_members({"word/document.xml": part})
        outcome = "checked"
    except MemoryError:
        outcome = "MemoryError"
    except DocumentRefusedError as refused:
        outcome = str(refused.breach)
    print(json.dumps(outcome))
    """
)


def test_a_parser_out_of_memory_is_a_spent_limit_not_damaged_xml() -> None:
    """expat reports running out of memory as a parse error, and the check classified it as
    damaged XML: within the caps, a part of distinct attributes or namespaces that filled a
    sandbox child's address space was stored Failed as ``xml_invalid``. It is a MemoryError
    now, which the child answers as its exhausted limit: refused ``MALFORMED_DOCUMENT``."""
    completed = subprocess.run(  # noqa: S603 - our own interpreter and script
        [sys.executable, "-c", _OUT_OF_MEMORY_SCRIPT],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr.decode()[-2000:]
    assert json.loads(completed.stdout) == "MemoryError"
