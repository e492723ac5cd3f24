"""A publication on the real SQLite config store whose last write fails (the host's default).

The workspace row is written first and the publication row last, in one transaction: a
failure of the last write (a trigger aborting it, as a full disk would) must roll the
workspace row back too, so the draft, the stored publication and the served snapshot agree.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from esra.core._static_config import StaticConfigRepository
from esra.core.admin import ExposureService, Role
from esra.sqlite._config_store import SqliteConfigStore
from tests.core.admin.test_chain import Admin, holder, run_until
from tests.core.factories import SLUG, TENANT


async def test_a_publication_whose_last_write_fails_leaves_nothing_saved_or_served(
    tmp_path: Path,
) -> None:
    database = tmp_path / "state.db"
    store = SqliteConfigStore(database)
    await store.initialize()
    try:
        h = Admin(store=store)
        await run_until(h, 4)
        before = await store.load(TENANT)
        assert before is not None
        published_before = await store.published_versions()
        with sqlite3.connect(database) as other:
            other.execute(
                "CREATE TRIGGER fail_publication BEFORE INSERT ON config_published "
                "BEGIN SELECT RAISE(ABORT, 'the disk is full'); END"
            )
        other.close()
        runtime = StaticConfigRepository()
        service = ExposureService(store, runtime, audit=h.audit, clock=h.clock)
        records = len(h.audit.records)
        with pytest.raises(sqlite3.Error):
            await service.publish(holder(Role.ESRA_EXPOSURE_MANAGE), TENANT, SLUG)
        assert await runtime.snapshot(TENANT) is None
        reopened = SqliteConfigStore(database)
        try:
            assert await reopened.load(TENANT) == before
            assert await reopened.published_versions() == published_before
            assert (await reopened.history(TENANT))[-1].version == before.version
            assert await reopened.pending_audit() == []
        finally:
            await reopened.close()
        assert [r.outcome for r in h.audit.records[records:]] == ["failed"]
    finally:
        await store.close()
