"""One reading of a documents row, whether an engine hands back text or native values."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from esra.core._docstore.document_rows import (
    findings_from_json,
    findings_json,
    stored_document,
    timestamp,
)
from esra.core._docstore.formats import DocumentFormat
from esra.core._docstore.model import DocumentState
from esra.core._docstore.ownership import DocumentOwner, OwnerKind
from esra.core._docstore.refusals import Breach
from esra.core._docstore.scanner import Finding
from esra.core.codes import DocumentRefusal

AT = datetime(2025, 3, 1, 12, 30, 0, 123456, tzinfo=UTC)
FINDINGS = (
    Finding(rule="aws_key", start=3, end=23, excerpt="AKIA…"),
    Finding(rule="forged_turn", start=90, end=97, excerpt="say system: do", excerpt_span=(4, 11)),
)


def _row(**overrides: object) -> dict[str, object]:
    row: dict[str, object] = {
        "id": "d1",
        "tenant_id": "acme",
        "title": "handbook.pdf",
        "format": "pdf",
        "sha256": "ab" * 32,
        "size": 1234,
        "scope": "hr",
        "state": "failed",
        "attempts": 2,
        "created_at": AT,
        "updated_at": AT,
        "revision": 1,
        "segment_count": 0,
        "failure": DocumentRefusal.MALFORMED_DOCUMENT.value,
        "remedy": "re-export it",
        "findings": [],
        "bytes_retained": True,
        "deleted": False,
        "released_by": None,
        "owner_kind": OwnerKind.CONNECTOR.value,
        "owner_connector": "sharepoint-hr",
        "uploaded_by": None,
        "failure_breach": None,
    }
    row.update(overrides)
    return row


def test_sqlite_text_and_postgres_values_read_as_the_same_document() -> None:
    """ISO text, JSON text and 0/1 (SQLite) read as PostgreSQL's datetime, list and bool."""
    native = _row(findings=json.loads(findings_json(FINDINGS)))
    text = _row(
        created_at=AT.isoformat(timespec="microseconds"),
        updated_at=AT.isoformat(timespec="microseconds"),
        findings=findings_json(FINDINGS),
        bytes_retained=1,
        deleted=0,
    )
    document = stored_document(native)
    assert stored_document(text) == document
    assert document.created_at == AT
    assert document.findings == FINDINGS
    assert (document.format, document.state) == (DocumentFormat.PDF, DocumentState.FAILED)
    assert document.failure is DocumentRefusal.MALFORMED_DOCUMENT
    assert document.owner == DocumentOwner.by_connector("sharepoint-hr")
    assert (document.bytes_retained, document.deleted) == (True, False)


def test_absent_values_read_as_none() -> None:
    """No failure, breach or findings: None and empty, never an enum of an empty string."""
    document = stored_document(_row(failure=None, remedy=None, findings=None, state="indexed"))
    assert (document.failure, document.failure_breach, document.findings) == (None, None, ())
    breached = stored_document(_row(failure_breach=Breach.ZIP_ENTRY_COUNT.value))
    assert breached.failure_breach is Breach.ZIP_ENTRY_COUNT


def test_findings_round_trip_and_timestamps_pass_through() -> None:
    """What a repository writes it reads back; a datetime is kept as it is."""
    assert findings_from_json(findings_json(FINDINGS)) == FINDINGS
    assert findings_from_json("[]") == ()
    assert timestamp(AT) is AT
    assert timestamp(AT.isoformat()) == AT


def test_a_finding_stored_before_its_excerpt_span_was_kept_reads_without_one() -> None:
    """Rows written before the span was stored read back with none; without a span the JSON
    is what it always was."""
    legacy = '[{"rule": "forged_turn", "start": 9, "end": 16, "excerpt": "x system: y"}]'
    (finding,) = findings_from_json(legacy)
    assert finding.excerpt_span is None
    assert findings_json([finding]) == legacy
    assert json.loads(findings_json(FINDINGS[1:]))[0]["excerpt_span"] == [4, 11]
