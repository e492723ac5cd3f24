"""A held audit outbox row SQLite cannot decode costs only itself (both SQLite outboxes).

A row of the configuration store's or a document store's outbox that did not decode — a
hand edit, a truncated write, a record of the wrong shape — was handed to ``claim_audit``
first on every forward, which raised on it: every later audit record, every tenant's, stayed
held for ever. It is now set aside and reported to the audit sink, and a record of a newer
ESRA waits for a newer host without blocking the records behind it.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from esra.core.admin import AuditOutbox, forward_audit_outbox
from esra.core.codes import AuditEvent
from esra.core.testing import InMemoryAuditSink
from esra.core.testing.audit_outbox_contract import (
    AuditOutboxPoisonContract,
    held_record,
    record_text,
)
from esra.sqlite._config_store import SqliteConfigStore
from esra.sqlite._docstore import SqliteDocumentRepository

pytestmark = pytest.mark.integration


def _plant(path: Path, table: str, text: str | bytes, correlation_id: str) -> int:
    with sqlite3.connect(path) as connection:
        cursor = connection.execute(
            f"INSERT INTO {table} (correlation_id, record) VALUES (?, ?)",
            (correlation_id, text),
        )
        assert cursor.lastrowid is not None
        return cursor.lastrowid


def _row_ids(path: Path, table: str) -> list[int]:
    with sqlite3.connect(path) as connection:
        rows = connection.execute(f"SELECT seq FROM {table} ORDER BY seq").fetchall()
    return [int(row[0]) for row in rows]


class TestConfigStoreOutbox(AuditOutboxPoisonContract):
    async def make_outbox(self, tmp_path: Path) -> AuditOutbox:
        store = SqliteConfigStore(tmp_path / "state.db")
        await store.initialize()
        return store

    async def plant(self, outbox: AuditOutbox, text: str) -> int:
        assert isinstance(outbox, SqliteConfigStore)
        self._planted = getattr(self, "_planted", 0) + 1
        return _plant(outbox.path, "config_audit_outbox", text, f"admin:planted-{self._planted}")

    async def stored_row_ids(self, outbox: AuditOutbox) -> list[int]:
        assert isinstance(outbox, SqliteConfigStore)
        return _row_ids(outbox.path, "config_audit_outbox")


class TestDocumentStoreOutbox(AuditOutboxPoisonContract):
    async def make_outbox(self, tmp_path: Path) -> AuditOutbox:
        repository = SqliteDocumentRepository(tmp_path / "store.db")
        await repository.initialize()
        return repository

    async def plant(self, outbox: AuditOutbox, text: str) -> int:
        assert isinstance(outbox, SqliteDocumentRepository)
        # A document store's records of two actions on one document share their id.
        return _plant(outbox.path, "store_audit_outbox", text, "esra.document.release:d1")

    async def stored_row_ids(self, outbox: AuditOutbox) -> list[int]:
        assert isinstance(outbox, SqliteDocumentRepository)
        return _row_ids(outbox.path, "store_audit_outbox")


@pytest.mark.parametrize(
    "stored",
    [
        pytest.param('{"event": "esra.admin.exposure.publish", "tenant_id": "ac', id="truncated"),
        pytest.param(b"\xff\xfe binary", id="not-text"),
        pytest.param("[" * 100_000 + "]" * 100_000, id="nested-deeper-than-json-reads"),
    ],
)
async def test_a_row_that_is_not_json_is_set_aside_and_reported(
    tmp_path: Path, stored: str | bytes
) -> None:
    store = SqliteConfigStore(tmp_path / "state.db")
    try:
        await store.initialize()
        poison = _plant(store.path, "config_audit_outbox", stored, "admin:truncated")
        _plant(store.path, "config_audit_outbox", record_text(held_record(1)), "admin:after")
        sink = InMemoryAuditSink()
        assert await forward_audit_outbox(store, sink) == 2
        set_aside, after = sink.records
        assert set_aside.event is AuditEvent.AUDIT_OUTBOX_ROW_SET_ASIDE
        assert set_aside.dimensions["row_id"] == poison
        raw = stored if isinstance(stored, bytes) else stored.encode()
        assert set_aside.dimensions["sha256"] == hashlib.sha256(raw).hexdigest()
        assert after == held_record(1)
        assert _row_ids(store.path, "config_audit_outbox") == [poison]
    finally:
        await store.close()
