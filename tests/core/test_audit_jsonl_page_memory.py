"""JsonLinesAuditLog.query holds one page, not every matching record of the file.

The file is never pruned (rotation is the host's), and a reviewer's ordinary query — the
newest page of the tenant — read every matching record into one list before sorting it: a
host's memory grew with the tenant's whole audit history, once per concurrent read.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from esra.core._audit import jsonl
from esra.core._audit.codec import record_from_document
from esra.core._audit.jsonl import JsonLinesAuditLog
from esra.core._audit.query import AuditQuery
from esra.core._audit.record import AuditRecord
from esra.core.testing.audit_contract import TENANT, contract_record

_RECORDS = 2000


async def test_a_read_holds_at_most_a_page_of_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Thousands of matching records, pages of one and two: the records alive at any time
    while the file is read never exceed the page and the one that says there is more."""
    log = JsonLinesAuditLog(tmp_path / "audit.jsonl")
    await log.write_batch([contract_record(n) for n in range(_RECORDS)])
    alive = 0
    most = 0

    def freed() -> None:
        nonlocal alive
        alive -= 1

    def counted(document: Mapping[str, Any]) -> AuditRecord:
        nonlocal alive, most
        record = record_from_document(document)
        # A copy this test owns (the suite's leak scan keeps every record ESRA code builds).
        copy = AuditRecord(
            event=record.event,
            tenant_id=record.tenant_id,
            correlation_id=record.correlation_id,
            at=record.at,
            outcome=record.outcome,
            reason=record.reason,
            dimensions=record.dimensions,
        )
        alive += 1
        most = max(most, alive)
        weakref.finalize(copy, freed)
        return copy

    monkeypatch.setattr(jsonl, "record_from_document", counted)
    page = await log.query(AuditQuery(tenant_id=TENANT, limit=1))
    assert [r.correlation_id for r in page.records] == [f"corr-{_RECORDS - 1}"]
    assert page.next_cursor is not None
    assert most <= 3  # the page, the next page's sign, the line being read
    rest = await log.query(AuditQuery(tenant_id=TENANT, limit=2, cursor=page.next_cursor))
    assert [r.correlation_id for r in rest.records] == [
        f"corr-{_RECORDS - 2}",
        f"corr-{_RECORDS - 3}",
    ]
    assert most <= 5  # the same, and the first page this test still holds
