"""A process killed (SIGKILL) between enabling or initialising a store and its audit record.

``kill_lifecycle_action_at_record`` runs ``StoreLifecycle.enable`` or ``initialise`` in a
child process whose shared state table is a real state database — a SQLite file or a
PostgreSQL configuration schema — and whose audit sink kills the process the moment it is
handed the action's record: after the state was set for every process, before the record
was written anywhere (without the outbox). ``enabled`` makes the store Enabled first, which
an initialisation needs; ``assert_applied_and_delivered`` checks what the kill left.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from datetime import UTC, datetime
from typing import Literal

from esra.core.codes import AuditEvent
from esra.core.docstore import StoreState, StoreStateTable, StoreStatus
from esra.core.testing import InMemoryAuditSink
from tests._outbox_drainer import forward_within

__all__ = [
    "ACTIONS",
    "assert_applied_and_delivered",
    "enabled",
    "kill_lifecycle_action_at_record",
]

TENANT = "acme"
OPERATOR = "alice@acme"
# Each action, with the state it sets and the record it writes.
_AFTER = {
    "enable": (StoreStatus.ENABLED, AuditEvent.STORE_ENABLE, "ok"),
    "initialise": (StoreStatus.INITIALIZING, AuditEvent.STORE_INITIALISE, "started"),
}
ACTIONS = tuple(_AFTER)

_CHILD = f"""
import asyncio, os, signal, sys

from esra.core import SystemClock
from esra.core.docstore import Operator, StoreLifecycle


class KilledOnRecord:
    async def record(self, record):
        os.kill(os.getpid(), signal.SIGKILL)


async def main(kind, target, schema, action):
    if kind == "postgres":
        from esra.postgres import PostgresConfigStore

        table = await PostgresConfigStore.open(target, schema=schema, max_size=1)
    else:
        from esra.sqlite import SqliteConfigStore

        table = SqliteConfigStore(target)

    async def apply_schema():
        return None

    lifecycle = StoreLifecycle(
        {TENANT!r}, apply_schema, audit=KilledOnRecord(), clock=SystemClock(), shared=table
    )
    roles = frozenset({{"ESRA_DATA_MANAGE"}})
    operator = Operator(subject={OPERATOR!r}, tenant_id={TENANT!r}, roles=roles)
    await getattr(lifecycle, action)(operator)
    await lifecycle.wait()
    print("the action returned without handing its record to the sink", flush=True)


asyncio.run(main(*sys.argv[1:]))
"""


async def enabled(table: StoreStateTable) -> None:
    """Record ``TENANT``'s store as Enabled (what an earlier enable left)."""
    await table.write_store_state(TENANT, StoreState(StoreStatus.ENABLED, datetime.now(UTC)))


def kill_lifecycle_action_at_record(
    kind: Literal["postgres", "sqlite"], target: str, action: str, schema: str = ""
) -> None:
    """Run ``action`` (``enable``, ``initialise``) in a child killed when its sink gets the
    record."""
    child = subprocess.run(  # noqa: S603 - our own interpreter and script
        [sys.executable, "-c", _CHILD, kind, target, schema, action],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert child.returncode == -signal.SIGKILL, (child.stdout, child.stderr)


async def assert_applied_and_delivered(table: StoreStateTable, action: str) -> None:
    """The killed ``action``'s state is set, and its record, held with it, is delivered."""
    status, event, outcome = _AFTER[action]
    state = await table.read_store_state(TENANT)
    assert state is not None
    assert state.status is status  # applied before the kill
    sink = InMemoryAuditSink()
    # A killed process's database session may hold the outbox's claim a moment longer.
    await forward_within(table, sink, expected=1)
    (record,) = sink.records
    assert (record.event, record.outcome, record.tenant_id) == (event, outcome, TENANT)
    assert record.dimensions["operator"] == OPERATOR
    assert await table.pending_audit() == []
