"""A tenant's store lifecycle: off by default, enabled, then initialised as a background job.

Disabled → Enabled (``enable``) → Initializing (``initialise``) → Ready or Failed; a Failed
store may be initialised again. Both actions need ``ESRA_DATA_MANAGE`` on the store's tenant
and are audited with the operator (and, for an operator of another tenant, ``cross_tenant``
and its ``operator_tenant``), denials included; reading the state needs ``ESRA_DATA_READ``.
Initialisation is never a side effect of first use, and it runs as a task rather than inside
the request that asked for it — DDL against a cold database can outlast any HTTP timeout —
so a caller starts it and polls ``state``. What initialising means is the engine's: the
lifecycle runs the injected :data:`StoreInitialiser` and turns its outcome into the state an
operator sees.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from enum import StrEnum

import attrs

from esra.core._admin.roles import NotPermittedError, Role
from esra.core._audit.record import AuditDimension, AuditRecord
from esra.core._docstore.management import Operator
from esra.core.codes import AuditEvent
from esra.core.ports import AuditSink, Clock

__all__ = [
    "StoreInitialisationError",
    "StoreInitialiser",
    "StoreLifecycle",
    "StoreNotReadyError",
    "StoreState",
    "StoreStatus",
]

_log = logging.getLogger(__name__)


class StoreStatus(StrEnum):
    """Where a tenant's store is in its lifecycle."""

    DISABLED = "disabled"
    ENABLED = "enabled"
    INITIALIZING = "initializing"
    READY = "ready"
    FAILED = "failed"


class StoreInitialisationError(Exception):
    """Initialisation failed for a classified ``reason``; ``remedy`` tells the operator what
    to do. Neither ever carries driver text: that goes to the log."""

    def __init__(self, reason: str, remedy: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.remedy = remedy


class StoreNotReadyError(Exception):
    """The store cannot take documents (or be searched) until it is Ready."""

    def __init__(self, status: StoreStatus) -> None:
        super().__init__(f"the document store is {status.value}, not ready")
        self.status = status


# Creates (idempotently) everything the store needs; raises StoreInitialisationError.
StoreInitialiser = Callable[[], Awaitable[None]]

# The states a schema found present may end: not Ready already, and not Initializing, where
# this process's own initialisation is still to say how it went.
_OBSERVABLY_READY = frozenset({StoreStatus.DISABLED, StoreStatus.ENABLED, StoreStatus.FAILED})

_UNEXPECTED_REMEDY = "Check the host's log for the cause, then initialise the store again."


@attrs.frozen
class StoreState:
    """What the status screen shows: the status, and for a failure its reason and remedy."""

    status: StoreStatus
    changed_at: datetime
    failure: str | None = None
    remedy: str | None = None


class StoreLifecycle:
    """One tenant's store lifecycle.

    Args:
        tenant_id: the tenant whose store this is; operators of other tenants are refused.
        initialiser: creates the store (the engine's schema, idempotently).
        audit: where enablement and each initialisation step are recorded.
        clock: time for the records and the state.
        status: the state at start-up — Ready for a store whose schema is already present.
    """

    def __init__(
        self,
        tenant_id: str,
        initialiser: StoreInitialiser,
        *,
        audit: AuditSink,
        clock: Clock,
        status: StoreStatus = StoreStatus.DISABLED,
    ) -> None:
        self._tenant_id = tenant_id
        self._initialiser = initialiser
        self._audit = audit
        self._clock = clock
        self._state = StoreState(status=status, changed_at=clock.now())
        self._task: asyncio.Task[None] | None = None

    @property
    def tenant_id(self) -> str:
        """The tenant whose store this is."""
        return self._tenant_id

    @property
    def current(self) -> StoreState:
        """The state, unchecked: for the host's own decisions (may it take uploads?)."""
        return self._state

    def state(self, operator: Operator) -> StoreState:
        """The state as an operator sees it; needs ``ESRA_DATA_READ``."""
        self._require(operator, Role.ESRA_DATA_READ)
        return self._state

    def observe_ready(self) -> bool:
        """Take Ready from the store's database, where another process initialised it.

        Another host or worker on the same database, or ``esra ingest`` beside a running
        host, may initialise the store; this process learns it from the schema it finds
        present (the host's readiness follower looks). Moves Disabled, Enabled or Failed to
        Ready and answers whether it moved; never while this process's own initialisation
        runs, whose outcome decides. Not audited here: the initialisation was audited where
        it ran.
        """
        if self._state.status not in _OBSERVABLY_READY:
            return False
        self._move(StoreStatus.READY)
        return True

    def require_ready(self) -> None:
        """Raise ``StoreNotReadyError`` unless the store is Ready."""
        if self._state.status is not StoreStatus.READY:
            raise StoreNotReadyError(self._state.status)

    async def enable(self, operator: Operator) -> StoreState:
        """Turn the store on for the tenant (idempotent once enabled or beyond)."""
        await self._authorise(operator, AuditEvent.STORE_ENABLE)
        if self._state.status is StoreStatus.DISABLED:
            self._move(StoreStatus.ENABLED)
        await self._record(AuditEvent.STORE_ENABLE, operator, "ok", status=self._state.status.value)
        return self._state

    async def initialise(self, operator: Operator) -> StoreState:
        """Start initialisation in the background and return at once (Initializing).

        Raises:
            NotPermittedError: the operator lacks ``ESRA_DATA_MANAGE``.
            StoreNotReadyError: the store is disabled (enable it first) or already
                initialising; ``status`` says which.
        """
        await self._authorise(operator, AuditEvent.STORE_INITIALISE)
        status = self._state.status
        if status in {StoreStatus.DISABLED, StoreStatus.INITIALIZING}:
            await self._record(
                AuditEvent.STORE_INITIALISE, operator, "rejected", status=status.value
            )
            raise StoreNotReadyError(status)
        self._move(StoreStatus.INITIALIZING)
        await self._record(AuditEvent.STORE_INITIALISE, operator, "started")
        self._task = asyncio.create_task(self._initialise(operator))
        return self._state

    async def wait(self) -> StoreState:
        """Wait for a running initialisation to finish; return the state."""
        if self._task is not None:
            await asyncio.shield(self._task)
        return self._state

    async def _initialise(self, operator: Operator) -> None:
        try:
            await self._initialiser()
        except StoreInitialisationError as failed:
            self._move(StoreStatus.FAILED, failure=failed.reason, remedy=failed.remedy)
            await self._record(AuditEvent.STORE_INITIALISE, operator, "failed", failed.reason)
            return
        except Exception:
            _log.exception("initialising the document store of tenant %s failed", self._tenant_id)
            self._move(StoreStatus.FAILED, failure="unexpected_error", remedy=_UNEXPECTED_REMEDY)
            await self._record(AuditEvent.STORE_INITIALISE, operator, "failed", "unexpected_error")
            return
        self._move(StoreStatus.READY)
        await self._record(AuditEvent.STORE_INITIALISE, operator, "ok")

    def _move(
        self, status: StoreStatus, *, failure: str | None = None, remedy: str | None = None
    ) -> None:
        self._state = StoreState(
            status=status, changed_at=self._clock.now(), failure=failure, remedy=remedy
        )

    def _require(self, operator: Operator, role: Role) -> None:
        if operator.tenant_id != self._tenant_id:
            raise NotPermittedError
        operator.require(role)

    async def _authorise(self, operator: Operator, event: AuditEvent) -> None:
        try:
            self._require(operator, Role.ESRA_DATA_MANAGE)
        except NotPermittedError:
            await self._record(event, operator, "denied", "role")
            raise

    async def _record(
        self,
        event: AuditEvent,
        operator: Operator,
        outcome: str,
        reason: str | None = None,
        **extra: AuditDimension,
    ) -> None:
        await self._audit.record(
            AuditRecord(
                event=event,
                tenant_id=self._tenant_id,
                correlation_id=f"{event.value}:{self._tenant_id}",
                at=self._clock.now(),
                outcome=outcome,
                reason=reason,
                dimensions={**operator.audit_dimensions(self._tenant_id), **extra},
            )
        )
