"""A process forwarding the audit outbox, stuck in its sink until it is killed (SIGKILL).

The cross-process tests of the outbox need a host that is in the middle of a forward — its
sink has been handed the oldest held record and has not returned — and that then dies
without any clean-up: no rollback, no unlock, no close. ``stuck_drainer`` starts one (a
``PostgresConfigStore`` or ``SqliteConfigStore`` on the given database), waits until its
sink holds a record, and kills it when the block ends unless the test did first.
"""

from __future__ import annotations

import asyncio
import contextlib
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Literal

import attrs

from esra.core.admin import AuditOutbox, forward_audit_outbox
from esra.core.ports import AuditSink

__all__ = ["StuckDrainer", "forward_within", "stuck_drainer"]

_CHILD = """
import asyncio, sys

from esra.core.admin import forward_audit_outbox


class Stuck:
    async def record(self, record):
        print("taken", record.correlation_id, flush=True)
        await asyncio.Event().wait()


async def main(kind, target, schema):
    if kind == "postgres":
        from esra.postgres import PostgresConfigStore

        store = await PostgresConfigStore.open(target, schema=schema, apply_schema=False)
    else:
        from esra.sqlite import SqliteConfigStore

        store = SqliteConfigStore(target)
    await forward_audit_outbox(store, Stuck())
    print("forwarded without holding a record", flush=True)


asyncio.run(main(*sys.argv[1:]))
"""


@attrs.define
class StuckDrainer:
    """The stuck process and the correlation id of the record its sink holds."""

    process: subprocess.Popen[str]
    correlation_id: str

    def kill(self) -> None:
        """SIGKILL, and wait for the process to be gone."""
        self.process.send_signal(signal.SIGKILL)
        assert self.process.wait(timeout=60) == -signal.SIGKILL


@contextlib.contextmanager
def stuck_drainer(
    kind: Literal["postgres", "sqlite"], target: str, schema: str = ""
) -> Iterator[StuckDrainer]:
    """Start a process forwarding the outbox of ``target`` into a sink that never returns.

    Returns once the sink holds a record (fails the test if it does not within 60 s).
    """
    process = subprocess.Popen(  # noqa: S603 - our own interpreter and script
        [sys.executable, "-c", _CHILD, kind, target, schema],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = ""
        deadline = time.monotonic() + 60
        while not line and time.monotonic() < deadline:
            ready, _, _ = select.select([process.stdout], [], [], 0.5)
            if ready:
                line = process.stdout.readline() or "exited: " + str(process.wait(timeout=10))
        if not line.startswith("taken "):
            if process.poll() is None:
                process.kill()
            line += process.stdout.read()
        assert line.startswith("taken "), line or "the drainer took no record within 60 s"
        yield StuckDrainer(process, line.split()[1])
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()


async def forward_within(outbox: AuditOutbox, sink: AuditSink, *, expected: int) -> None:
    """Forward ``outbox`` to ``sink`` until ``expected`` records were delivered (fails the
    test after 30 s). A process just killed mid-forward may still hold the claim for the
    moment its database session takes to end, so one forward right after the kill can
    rightly deliver nothing."""
    delivered = 0
    async with asyncio.timeout(30):
        while delivered < expected:
            delivered += await forward_audit_outbox(outbox, sink)
            if delivered < expected:
                await asyncio.sleep(0.05)
