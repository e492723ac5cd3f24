"""The real SQLite store failing a save: the chain still audits the attempt ``failed``.

The store's save is made to fail as a driver would (a trigger aborts the history insert, so
``sqlite3`` raises mid-transaction); the chain must record the attempt on the audit sink with
a classified reason, leave nothing saved (the transaction rolled back, its outbox row too),
and raise the driver's error for the admin API to answer as ``ESRA_INTERNAL``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from esra.core.admin import Role
from esra.core.codes import AuditEvent
from esra.sqlite._config_store import SqliteConfigStore
from tests.core.admin.test_chain import Admin, holder, policy, run_until
from tests.core.factories import TENANT

pytestmark = pytest.mark.asyncio

DRIVER_TEXT = "simulated failure of disk /var/lib/esra/state.db"


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteConfigStore]:
    opened = SqliteConfigStore(tmp_path / "state.db")
    await opened.initialize()
    yield opened
    await opened.close()


def _break_saves(path: Path) -> None:
    with sqlite3.connect(path) as other:
        other.execute(
            "CREATE TRIGGER fail_saves BEFORE INSERT ON config_changes "
            f"BEGIN SELECT RAISE(ABORT, '{DRIVER_TEXT}'); END"
        )
    other.close()


async def test_a_save_the_sqlite_store_fails_is_audited_failed(
    store: SqliteConfigStore,
) -> None:
    h = Admin(store=store)
    await run_until(h, 2)
    version = (await h.current(TENANT)).version
    _break_saves(store.path)

    with pytest.raises(sqlite3.DatabaseError):
        await h.governance.author_policy(holder(Role.GOVERNANCE_MANAGE), TENANT, policy())

    failed = [
        r
        for r in h.audit.records
        if r.event is AuditEvent.ADMIN_POLICY_AUTHOR and r.outcome == "failed"
    ]
    assert len(failed) == 1
    assert failed[0].reason == "unexpected_error"
    assert DRIVER_TEXT not in repr(failed[0])
    # The transaction rolled back whole: no version, no history row, no held record.
    assert (await h.current(TENANT)).version == version
    assert [c.version for c in await store.history(TENANT)][-1] == version
    assert await store.pending_audit() == []
