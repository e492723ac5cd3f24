"""Processes sharing one SQLite state file forward the audit outbox without duplicates.

``esra serve``, ``esra worker`` and ``esra config import`` all open the embedded default's
``state.db`` and forward the held audit records of administrative changes, so two of them
can forward at once. A process now forwards a record only while it holds the outbox's lock
file (``flock``), which the kernel releases with a process that dies.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from esra.core.admin import forward_audit_outbox
from esra.core.testing import InMemoryAuditSink
from esra.core.testing.config_contract import hold_audit_records
from esra.sqlite._config_store import SqliteConfigStore
from tests._outbox_drainer import stuck_drainer

pytestmark = pytest.mark.integration


async def test_a_process_killed_mid_forward_leaves_the_outbox_to_the_others(
    tmp_path: Path,
) -> None:
    store = SqliteConfigStore(tmp_path / "state.db")
    try:
        held = await hold_audit_records(store, 3)
        sink = InMemoryAuditSink()
        with stuck_drainer("sqlite", str(store.path)) as drainer:
            assert drainer.correlation_id == held[0].correlation_id
            assert await forward_audit_outbox(store, sink) == 0  # the other process holds it
            drainer.kill()
            assert await forward_audit_outbox(store, sink) == 3
        assert sink.records == held
        assert await store.pending_audit() == []
    finally:
        await store.close()
