"""A ``.docx``'s text and heading units, read with python-docx after the package checks.

Runs only in an extraction sandbox child (``_docx_worker``): python-docx and lxml read
untrusted XML, and their time and memory are bounded by the child's limits, not trusted.
The package passes the same zip and XML checks as at upload, here again: a document
re-indexed by hand may be a stored breach, and extraction must never be the first to
inflate it.
"""

from __future__ import annotations

import io
from typing import Any

from docx import Document
from docx.table import Table, _Cell

from esra.core._docstore.extraction import (
    Extraction,
    ExtractionLimits,
    UnitStarts,
    text_too_long,
    unit_label,
)
from esra.core._docstore.ooxml import check_docx_members
from esra.core._docstore.refusals import DocumentRefusedError
from esra.core._docstore.zipguard import inflate_members
from esra.core.codes import DocumentRefusal

__all__ = ["read_docx"]


def read_docx(data: bytes, limits: ExtractionLimits) -> Extraction:
    """The document's paragraphs and tables, one line each; headings start units.

    Raises:
        DocumentRefusedError: a package check's breach, ``TEXT_TOO_LONG`` or
            ``TOO_MANY_SEGMENTS`` past ``limits``, ``MALFORMED_DOCUMENT`` when python-docx
            cannot read it.
    """
    # Counted inflation and DTD-free XML first: python-docx trusts its zip and its parser.
    check_docx_members(inflate_members(data, limits.zip))
    lines: list[str] = []
    units = UnitStarts(limits)
    labels: list[str] = [""]
    offset = 0
    # python-docx parses attribute values lazily, as the content is read: a well-formed
    # package can open fine and then raise on a bad value (a cell spanning "x" columns). So
    # reading is guarded as a whole, not only opening.
    try:
        document = Document(io.BytesIO(data))
        for block in document.iter_inner_content():
            if isinstance(block, Table):
                chunk = _table_text(block)
            else:
                chunk = block.text
                style = (block.style.name if block.style is not None else "") or ""
                if style.startswith(("Heading", "Title")) and chunk.strip():
                    if offset > 0:
                        units.add(offset)
                        labels.append(unit_label(chunk))
                    else:
                        labels[0] = unit_label(chunk)
            lines.append(chunk)
            offset += len(chunk) + 1
            if offset > limits.max_chars + 1:
                raise text_too_long(limits)
    except DocumentRefusedError:
        raise  # our own limits (text length, segment count) keep their classification
    except Exception as exc:
        raise DocumentRefusedError(
            DocumentRefusal.MALFORMED_DOCUMENT, detail=f"python-docx: {type(exc).__name__}"
        ) from exc
    return Extraction(
        text="\n".join(lines),
        boundaries=tuple(units.starts),
        labels=tuple(labels),
        max_segments=limits.max_segments,
    )


def _table_text(table: Any) -> str:
    """One line per row: the text of each ``<w:tc>`` the row holds, separated by ``|``.

    Not python-docx's ``row.cells``: it resolves every vertically merged cell to the cell
    above it by scanning the grid offsets of the rows before, which costs time cubic in the
    row width (a 470 KB table of 6,000 merged columns ran for hours) and repeats a spanned
    cell's text once per grid column. A cell's own text is what the document holds.
    """
    return "\n".join(
        " | ".join(_Cell(tc, table).text for tc in tr.tc_lst) for tr in table._tbl.tr_lst
    )
