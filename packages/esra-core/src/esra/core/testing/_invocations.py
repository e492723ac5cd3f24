"""Run a stage outside the retriever, with its audit trail written as the retriever writes it.

A stage only notes its decisions on the invocation's ``AuditTrail``; the retriever writes
them when the stage ends. A test that calls a stage directly opens the invocation with
``audited`` and reads the records from its sink afterwards, whether the stage returned or
raised.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from esra.core._clock import Clock
from esra.core._context import InvocationContext
from esra.core._pipeline.invocation import Invocation
from esra.core._pipeline.scope import EffectiveScope, ScopedInvocation
from esra.core.ports import AuditSink
from esra.core.testing._fakes import FakeClock, InMemoryAuditSink

__all__ = ["audited", "audited_in_scope"]


@contextlib.asynccontextmanager
async def audited(
    ctx: InvocationContext, *, audit: AuditSink | None = None, clock: Clock | None = None
) -> AsyncIterator[Invocation]:
    """The invocation of ``ctx``; what its stages noted is written to ``audit`` on exit."""
    invocation = Invocation.start(
        ctx, clock=clock or FakeClock(), audit=audit or InMemoryAuditSink()
    )
    try:
        yield invocation
    finally:
        await invocation.audit.write()


@contextlib.asynccontextmanager
async def audited_in_scope(
    ctx: InvocationContext,
    scope: EffectiveScope,
    *,
    audit: AuditSink | None = None,
    clock: Clock | None = None,
) -> AsyncIterator[ScopedInvocation]:
    """``audited``, for a stage after scope resolution: the invocation within ``scope``."""
    async with audited(ctx, audit=audit, clock=clock) as invocation:
        yield ScopedInvocation.of(invocation, scope)
