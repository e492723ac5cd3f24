"""A process killed (SIGKILL) in the middle of enabling or initialising a store.

``kill_lifecycle_action_at_record`` runs ``StoreLifecycle.enable`` or ``initialise`` in a
child process whose shared state table is a real state database — a SQLite file or a
PostgreSQL configuration schema — and whose audit sink kills the process the moment it is
handed the action's record: after the state was set for every process, before the record
was written anywhere (without the outbox). ``enabled`` makes the store Enabled first, which
an initialisation needs; ``assert_applied_and_delivered`` checks what the kill left.

``kill_initialisation_after_its_schema`` kills the child as its initialiser returns: the
schema is in place, the "started" record delivered, the outcome never written.
``assert_concluded_once`` checks that the processes finding the schema write the outcome
for it, once.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from datetime import UTC, datetime
from typing import Literal

from esra.core import SystemClock
from esra.core.codes import AuditEvent
from esra.core.docstore import StoreLifecycle, StoreState, StoreStateTable, StoreStatus
from esra.core.testing import InMemoryAuditSink
from tests._outbox_drainer import forward_within

__all__ = [
    "ACTIONS",
    "assert_applied_and_delivered",
    "assert_concluded_once",
    "enabled",
    "kill_initialisation_after_its_schema",
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


class Kept:
    async def record(self, record):
        pass


async def main(kind, target, schema, action, killed_at):
    if kind == "postgres":
        from esra.postgres import PostgresConfigStore

        table = await PostgresConfigStore.open(target, schema=schema, max_size=1)
    else:
        from esra.sqlite import SqliteConfigStore

        table = SqliteConfigStore(target)

    async def apply_schema():
        if killed_at == "schema":
            os.kill(os.getpid(), signal.SIGKILL)

    sink = KilledOnRecord() if killed_at == "record" else Kept()
    lifecycle = StoreLifecycle(
        {TENANT!r}, apply_schema, audit=sink, clock=SystemClock(), shared=table
    )
    roles = frozenset({{"ESRA_DATA_MANAGE"}})
    operator = Operator(subject={OPERATOR!r}, tenant_id={TENANT!r}, roles=roles)
    await getattr(lifecycle, action)(operator)
    await lifecycle.wait()
    print("the action returned without being killed", flush=True)


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
    _killed_child(kind, target, schema, action, "record")


def kill_initialisation_after_its_schema(
    kind: Literal["postgres", "sqlite"], target: str, schema: str = ""
) -> None:
    """Initialise in a child killed as its initialiser returns, before the outcome."""
    _killed_child(kind, target, schema, "initialise", "schema")


def _killed_child(*arguments: str) -> None:
    child = subprocess.run(  # noqa: S603 - our own interpreter and script
        [sys.executable, "-c", _CHILD, *arguments],
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


async def assert_concluded_once(table: StoreStateTable) -> None:
    """The killed initialisation left Initializing; two processes then find its schema: the
    first writes Ready with an "ok" record that says so, the second writes nothing."""
    recorded = await table.read_store_state(TENANT)
    assert recorded is not None
    assert recorded.status is StoreStatus.INITIALIZING
    sink = InMemoryAuditSink()
    for _process in range(2):
        lifecycle = StoreLifecycle(
            TENANT, _no_schema, audit=sink, clock=SystemClock(), shared=table
        )
        assert (await lifecycle.refresh(schema_present=True)).status is StoreStatus.READY
    (record,) = sink.records
    assert (record.event, record.outcome, record.tenant_id) == (
        AuditEvent.STORE_INITIALISE,
        "ok",
        TENANT,
    )
    assert record.dimensions["concluded"] == "schema_present"
    concluded = await table.read_store_state(TENANT)
    assert concluded is not None
    assert concluded.status is StoreStatus.READY
    assert await table.pending_audit() == []


async def _no_schema() -> None:
    raise AssertionError("a process that finds the schema initialises nothing")
