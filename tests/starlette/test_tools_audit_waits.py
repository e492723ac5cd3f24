"""A tool call's audit records: all written before its answer, by one commit, not one each."""

from __future__ import annotations

import asyncio

from esra.core._audit.batching import BatchingAuditSink
from esra.core.codes import AuditEvent
from esra.core.testing._audit_log import GatedBackend, InMemoryAuditLog
from tests.starlette._tokens import idp
from tests.starlette._world import mcp_client, open_world

_PATIENCE_S = 10.0
# Far longer than any test runs: a batch written is one the call asked for, never a timeout.
_NEVER_S = 3600.0


async def test_a_call_is_answered_after_one_commit_of_all_its_records() -> None:
    """wait_for_write: the answer waits for the commit; the call's records share that one."""
    log = InMemoryAuditLog()
    gated = GatedBackend(log)
    sink = BatchingAuditSink(gated, flush_interval_s=_NEVER_S, wait_for_write=True)
    async with open_world(audit=sink) as world, mcp_client(world.app, idp().token()) as client:
        call = asyncio.create_task(client.call_tool("esra_hr_search", {"prompt": "leave"}))
        async with asyncio.timeout(_PATIENCE_S):
            while gated.waiting == 0:
                await asyncio.sleep(0.002)
        assert not call.done()  # no answer while its records are not durable
        assert world.providers["tenant-a"].executed  # the pipeline ran: all records made
        gated.gate.set()
        result = await call
    await sink.aclose()
    assert not result.is_error
    events = [r.event for r in log.records]
    assert events[0] is AuditEvent.INVOKE
    assert AuditEvent.RETRIEVE in events
    assert log.batches == [len(events)]  # one commit for the whole call
