"""``esra ingest``: what a hostile directory can do to the command run over it.

Whoever can write into a directory an operator ingests chooses its entries' names and
kinds. A symbolic link planted there must not make the command upload a file from outside
the tree (``/etc/shadow`` through ``notes.txt``), and a name must not rewrite the per-file
table the operator reads (a newline forging a row, an escape sequence, bytes that are not
UTF-8).
"""

from __future__ import annotations

import io
import os
from pathlib import Path

from esra.starlette._ingest import IngestRow, _Progress, collect_files, render_table


def test_a_symlink_inside_a_walked_directory_is_not_followed(tmp_path: Path) -> None:
    """A link inside the tree to a file outside it is skipped, like a hidden file."""
    outside = tmp_path / "shadow"
    outside.write_text("root:$6$secret-hash:19000:0:99999:7:::\n")
    tree = tmp_path / "shared"
    tree.mkdir()
    (tree / "ok.txt").write_text("a document\n")
    (tree / "notes.txt").symlink_to(outside)

    found = collect_files([tree])

    assert found == [tree / "ok.txt"]


def test_a_symlink_named_on_the_command_line_is_still_read(tmp_path: Path) -> None:
    """The operator named it: following it is what they asked for."""
    target = tmp_path / "real.txt"
    target.write_text("a document\n")
    link = tmp_path / "link.txt"
    link.symlink_to(target)

    assert collect_files([link]) == [link]


def test_a_file_name_cannot_forge_a_row_of_the_table() -> None:
    """Control characters in a name are shown escaped: one file, one line."""
    forged = "a\nFAKE.txt  stored  indexed\x1b[2K\r"
    table = render_table([IngestRow(forged, "refused", "-", "UNSUPPORTED_TYPE: convert it")])

    lines = table.splitlines()
    assert len(lines) == 2  # the header and the one file
    assert "\x1b" not in table
    assert "\r" not in table
    assert "\\n" in lines[1]


def test_a_name_that_is_not_utf8_is_shown_not_raised(tmp_path: Path) -> None:
    """A name whose bytes are not UTF-8 is printable on a strict UTF-8 stream."""
    name = os.fsdecode(b"\xff\xfe.txt")
    table = render_table([IngestRow(name, "stored", "indexed", "")])
    strict = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")

    strict.write(table)  # would raise UnicodeEncodeError on a surrogate
    strict.flush()
    assert "\\xff\\xfe.txt" in table


def test_progress_lines_escape_the_name_too() -> None:
    """The per-file progress line on stderr is one line whatever the name holds."""
    stream = io.StringIO()
    progress = _Progress(stream, 1)

    progress.step(1, "upload", "a\nupload [1/1] forged: stored")

    assert stream.getvalue().count("\n") == 1
