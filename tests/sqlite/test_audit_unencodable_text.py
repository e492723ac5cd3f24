"""SqliteAuditLog: text UTF-8 cannot carry never makes a batch unwritable.

A lone surrogate reaches a record from a token's ``sub`` (JSON's ``\\ud800`` escape survives
``json.loads``) or a command line's undecodable bytes (``surrogateescape``). Bound as it is,
sqlite3 raises ``UnicodeEncodeError`` for the whole batch; the sink retries that batch
forever, and every record queued behind it — every tenant's — is held until the sink refuses
all of them.
"""

from __future__ import annotations

from pathlib import Path

import attrs

from esra.core._audit.query import AuditQuery
from esra.core.testing.audit_contract import TENANT, contract_record
from esra.sqlite._audit import SqliteAuditLog


async def _open(path: Path) -> SqliteAuditLog:
    log = SqliteAuditLog(path)
    await log.initialize()
    return log


async def test_a_lone_surrogate_in_any_text_column_does_not_poison_the_batch(
    tmp_path: Path,
) -> None:
    """Every column bound as text: the batch commits, the good record beside it included."""
    hostile = [
        contract_record(1, subject="eve\ud800"),
        contract_record(2, operator="eve\udcff"),
        attrs.evolve(contract_record(3), correlation_id="c\udfff"),
        attrs.evolve(contract_record(4), outcome="ok\ud800", reason="r\ud800"),
    ]
    log = await _open(tmp_path / "audit.db")
    try:
        await log.write_batch([contract_record(0), *hostile])
        page = await log.query(AuditQuery(tenant_id=TENANT))
        assert [r.correlation_id for r in page.records] == [
            "corr-4",
            "c\ufffd",
            "corr-2",
            "corr-1",
            "corr-0",
        ]
        assert page.records[-2].dimensions == {"subject": "eve\ufffd"}
        assert (page.records[0].outcome, page.records[0].reason) == ("ok\ufffd", "r\ufffd")
        # The subject a reviewer is shown finds the record it was shown on.
        shown = await log.query(AuditQuery(tenant_id=TENANT, subject="eve\ufffd"))
        assert [r.correlation_id for r in shown.records] == ["corr-2", "corr-1"]
    finally:
        await log.close()


async def test_a_lone_surrogate_tenant_is_stored_and_read_back(tmp_path: Path) -> None:
    """The tenant column too; its reader (the same text) finds it, nobody else does."""
    log = await _open(tmp_path / "audit.db")
    try:
        await log.write_batch([contract_record(1, tenant="t\ud800"), contract_record(2)])
        assert len((await log.query(AuditQuery(tenant_id="t\ud800"))).records) == 1
        assert [
            r.correlation_id for r in (await log.query(AuditQuery(tenant_id=TENANT))).records
        ] == ["corr-2"]
    finally:
        await log.close()


async def test_query_filters_with_a_lone_surrogate_match_what_was_stored(tmp_path: Path) -> None:
    """A filter is bound like the value it is compared with, so it neither crashes nor misses."""
    log = await _open(tmp_path / "audit.db")
    try:
        await log.write_batch([contract_record(1, subject="eve\ud800")])
        found = await log.query(AuditQuery(tenant_id=TENANT, subject="eve\ud800"))
        assert len(found.records) == 1
        none = await log.query(AuditQuery(tenant_id=TENANT, correlation_id="c\ud800"))
        assert none.records == ()
    finally:
        await log.close()
