"""Sandbox body: a DOCX's text and units, or a classified refusal. Runs only in a child.

``{"text": "...", "boundaries": [...], "labels": [...]}`` or ``{"refusal": "...", "detail":
"...", "breach": "..." | null}`` — see ``_sandbox_server`` for the process and its limits.
The options carry the rest of the caller's ``ExtractionLimits``: ``{"segments": int, "zip":
{ZipLimits' fields}}``.

``check_package`` is upload inspection's part: the zip and XML checks alone, under the
options' ``{"zip": {ZipLimits' fields}}``, answering ``{"checked": true}`` or the refusal.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

import attrs
from docx import Document

from esra.core._docstore.docx_text import read_docx
from esra.core._docstore.extraction import ExtractionLimits
from esra.core._docstore.ooxml import check_docx_members
from esra.core._docstore.refusals import DocumentRefusedError
from esra.core._docstore.zipguard import ZipLimits, inflate_members


def _refusal(refused: DocumentRefusedError) -> dict[str, object]:
    breach = refused.breach.value if refused.breach is not None else None
    return {"refusal": refused.refusal.value, "detail": refused.detail, "breach": breach}


def extract_docx(data: bytes, max_chars: int, options: Mapping[str, Any]) -> dict[str, object]:
    """Read ``data`` under ``max_chars`` and the options' limits."""
    limits = ExtractionLimits(
        max_chars=max_chars,
        max_segments=int(options["segments"]),
        zip=ZipLimits(**options["zip"]),
    )
    try:
        extraction = read_docx(data, limits)
    except DocumentRefusedError as refused:
        return _refusal(refused)
    return {
        "text": extraction.text,
        "boundaries": list(extraction.boundaries),
        "labels": list(extraction.labels),
    }


def check_package(data: bytes, _max_chars: int, options: Mapping[str, Any]) -> dict[str, object]:
    """Upload inspection's checks of ``data``: counted inflation under the options'
    ``ZipLimits``, then every XML part (``check_docx_members``); nothing is read further."""
    try:
        check_docx_members(inflate_members(data, ZipLimits(**options["zip"])))
    except DocumentRefusedError as refused:
        return _refusal(refused)
    return {"checked": True}


def warm_up() -> None:
    """Read a document of our own — a heading, a paragraph and a table on python-docx's
    default template — so that what python-docx and lxml set up on first use is done once
    in the sandbox server, not again in every child (see ``_sandbox_server``)."""
    document = Document()
    document.add_heading("warm up", level=1)
    document.add_paragraph("warm up")
    document.add_table(rows=1, cols=2).cell(0, 0).text = "warm up"
    buffer = io.BytesIO()
    document.save(buffer)
    options = {"segments": 16, "zip": attrs.asdict(ZipLimits())}
    extract_docx(buffer.getvalue(), 1 << 20, options)
