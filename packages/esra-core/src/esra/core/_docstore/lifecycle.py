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

Several processes may serve one store (hosts on one database, ``esra serve --workers``).
With a :class:`StoreStateTable` shared by them, every state an action sets is written there,
and a process that is neither Ready nor running an initialisation of its own takes the
recorded state before it decides an action, and whenever its host looks
(:meth:`StoreLifecycle.refresh`): an operator may enable through one process and initialise
through another, and an Enabled or Failed store stays so across a restart. Ready itself is
the store's schema being present, which the host checks; a record never makes a store Ready.

With a shared table, a state an action sets is written with the action's audit record, in
one transaction, into the table's audit outbox (``StoreStateTable`` is an ``AuditOutbox``),
and forwarded to the audit sink from there (``esra.core._admin.audit_outbox``): a process
killed between setting the state and recording it, or a sink failing after the readiness
check, no longer leaves an enabled or initialising store unaudited. Without one, the state
lives and dies with this process, and the record goes to the sink directly. Denials and
refusals change nothing and are recorded directly. Each record carries a fresh
``admin:<uuid>`` correlation id, as every administrative action's does.

An initialisation whose process ended before writing its outcome (killed after its DDL, or
mid-way) leaves Initializing recorded with only its "started" record. The first process to
find it concluded writes the outcome for it, with a record of its own, replacing exactly
that recorded state (``StoreStateTable.replace_store_state``: of several processes finding
it, one writes): Ready, "ok", where the host finds the schema present; Failed,
"interrupted", once the lease has passed without. These records name no operator and carry
``concluded``: what the process found. An initialisation that is only slow still records its
own outcome when it ends, so a start has at least one outcome record, and in that race two.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Protocol

import attrs

from esra.core._admin.audit_outbox import AuditOutbox, forward_audit_outbox
from esra.core._admin.roles import NotPermittedError, Role
from esra.core._audit.acceptance import require_accepting
from esra.core._audit.record import AuditDimension, AuditRecord
from esra.core._docstore.management import Operator
from esra.core.codes import AuditEvent
from esra.core.ports import AuditSink, Clock

__all__ = [
    "INITIALISATION_LEASE",
    "StoreInitialisationError",
    "StoreInitialiser",
    "StoreLifecycle",
    "StoreNotReadyError",
    "StoreState",
    "StoreStateTable",
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

_UNEXPECTED_REMEDY = "Check the host's log for the cause, then initialise the store again."
# How long another process's recorded Initializing is believed. Past it, that process most
# likely died mid-way (a kill, a crash), and the store shows Failed, "interrupted", with the
# way out, instead of Initializing for ever; generous, since DDL against a cold database may
# take minutes, and a store that does finish turns Ready from its schema all the same.
INITIALISATION_LEASE = timedelta(minutes=30)
_INTERRUPTED = "interrupted"
_INTERRUPTED_REMEDY = (
    "The initialisation stopped without an outcome (its host ended mid-way): initialise the "
    "store again."
)
# What a process that concludes another's initialisation found (the record's ``concluded``).
_SCHEMA_PRESENT = "schema_present"
_LEASE_PASSED = "lease_passed"


@attrs.frozen
class StoreState:
    """What the status screen shows: the status, and for a failure its reason and remedy."""

    status: StoreStatus
    changed_at: datetime
    failure: str | None = None
    remedy: str | None = None


class StoreStateTable(AuditOutbox, Protocol):
    """**Port:** each tenant's last store state, shared by the processes serving its store,
    and the audit outbox its changes' records are held in."""

    async def read_store_state(self, tenant_id: str) -> StoreState | None:
        """The state last written for the tenant's store, if any."""
        ...

    async def write_store_state(
        self, tenant_id: str, state: StoreState, *, audit: AuditRecord | None = None
    ) -> None:
        """Record ``state`` as the tenant's store state (replacing the last), and hold
        ``audit`` in the outbox in the same transaction: both are stored or neither."""
        ...

    async def replace_store_state(
        self, tenant_id: str, expected: StoreState, state: StoreState, *, audit: AuditRecord
    ) -> bool:
        """Record ``state`` and hold ``audit`` with it, as ``write_store_state`` does, only if
        the tenant's recorded state still has ``expected``'s status and ``changed_at``;
        return whether it did. Of several processes replacing one recorded state, one does."""
        ...


class StoreLifecycle:
    """One tenant's store lifecycle.

    Args:
        tenant_id: the tenant whose store this is; operators of other tenants are refused.
        initialiser: creates the store (the engine's schema, idempotently).
        audit: where enablement and each initialisation step are recorded.
        clock: time for the records and the state.
        status: the state at start-up — Ready for a store whose schema is already present.
        shared: where the processes serving this store record its state (``None``: this
            process alone knows it).
    """

    def __init__(
        self,
        tenant_id: str,
        initialiser: StoreInitialiser,
        *,
        audit: AuditSink,
        clock: Clock,
        status: StoreStatus = StoreStatus.DISABLED,
        shared: StoreStateTable | None = None,
    ) -> None:
        self._tenant_id = tenant_id
        self._shared = shared
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

    async def state(self, operator: Operator) -> StoreState:
        """The state as an operator sees it, with what other processes recorded taken
        first (an enable through another host shows here at once); needs
        ``ESRA_DATA_READ``."""
        self._require(operator, Role.ESRA_DATA_READ)
        await self._adopt_recorded()
        return self._state

    async def refresh(self, *, schema_present: bool) -> StoreState:
        """Take what other processes did to the store; return the state.

        ``schema_present`` is what the host found in the store's database: a schema present
        makes the store Ready (another process initialised it — another host or worker, or
        ``esra ingest`` beside a running host; not audited again here). Otherwise the state
        recorded in the shared table, if any, is taken. Neither happens while this process
        runs an initialisation of its own, whose outcome decides, nor once it is Ready.
        """
        if self._state.status is StoreStatus.READY or self._initialising_here():
            return self._state
        if not schema_present:
            await self._adopt_recorded()
            return self._state
        self._move(StoreStatus.READY)
        if self._shared is not None:
            recorded = await self._shared.read_store_state(self._tenant_id)
            if recorded is not None and recorded.status is StoreStatus.INITIALIZING:
                await self._conclude(recorded, self._state, _SCHEMA_PRESENT)
        return self._state

    def require_ready(self) -> None:
        """Raise ``StoreNotReadyError`` unless the store is Ready."""
        if self._state.status is not StoreStatus.READY:
            raise StoreNotReadyError(self._state.status)

    async def enable(self, operator: Operator) -> StoreState:
        """Turn the store on for the tenant (idempotent once enabled or beyond)."""
        await self._authorise(operator, AuditEvent.STORE_ENABLE)
        await self._adopt_recorded()
        if self._state.status is StoreStatus.DISABLED:
            # The state is shared with every process: not changed while unrecordable.
            await require_accepting(self._audit)
            enabled = self._audit_record(
                AuditEvent.STORE_ENABLE, operator, "ok", status=StoreStatus.ENABLED.value
            )
            await self._set(StoreStatus.ENABLED, audit=enabled)
            return self._state
        await self._record(AuditEvent.STORE_ENABLE, operator, "ok", status=self._state.status.value)
        return self._state

    async def initialise(self, operator: Operator) -> StoreState:
        """Start initialisation in the background and return at once (Initializing).

        Another process's initialisation, recorded as Initializing, does not stop this one:
        initialising is idempotent, and that process may have died mid-way.

        Raises:
            NotPermittedError: the operator lacks ``ESRA_DATA_MANAGE``.
            StoreNotReadyError: the store is disabled (enable it first) or this process is
                already initialising it; ``status`` says which.
        """
        await self._authorise(operator, AuditEvent.STORE_INITIALISE)
        await self._adopt_recorded()
        status = self._state.status
        if status is StoreStatus.DISABLED or self._initialising_here():
            await self._record(
                AuditEvent.STORE_INITIALISE, operator, "rejected", status=status.value
            )
            raise StoreNotReadyError(status)
        await require_accepting(self._audit)
        started = self._audit_record(AuditEvent.STORE_INITIALISE, operator, "started")
        await self._set(StoreStatus.INITIALIZING, audit=started)
        self._task = asyncio.create_task(self._initialise(operator))
        return self._state

    async def wait(self) -> StoreState:
        """Wait for a running initialisation to finish; return the state."""
        if self._task is not None:
            await asyncio.shield(self._task)
        return self._state

    async def _initialise(self, operator: Operator) -> None:
        event = AuditEvent.STORE_INITIALISE
        try:
            await self._initialiser()
        except StoreInitialisationError as failed:
            outcome = self._audit_record(event, operator, "failed", failed.reason)
            await self._settle(
                StoreStatus.FAILED, outcome, failure=failed.reason, remedy=failed.remedy
            )
            return
        except Exception:
            _log.exception("initialising the document store of tenant %s failed", self._tenant_id)
            outcome = self._audit_record(event, operator, "failed", "unexpected_error")
            await self._settle(
                StoreStatus.FAILED, outcome, failure="unexpected_error", remedy=_UNEXPECTED_REMEDY
            )
            return
        await self._settle(StoreStatus.READY, self._audit_record(event, operator, "ok"))

    def _initialising_here(self) -> bool:
        return self._task is not None and not self._task.done()

    async def _adopt_recorded(self) -> None:
        """Take the shared table's state, unless this process is Ready or initialising."""
        if self._shared is None or self._state.status is StoreStatus.READY:
            return
        if self._initialising_here():
            return
        recorded = await self._shared.read_store_state(self._tenant_id)
        # Ready is the schema's to say (``refresh``), never a record's: a store whose schema
        # is gone is not Ready whatever was once written.
        if recorded is None or recorded.status is StoreStatus.READY:
            return
        if (
            recorded.status is StoreStatus.INITIALIZING
            and self._clock.now() - recorded.changed_at > INITIALISATION_LEASE
        ):
            interrupted = StoreState(
                status=StoreStatus.FAILED,
                changed_at=self._clock.now(),
                failure=_INTERRUPTED,
                remedy=_INTERRUPTED_REMEDY,
            )
            await self._conclude(recorded, interrupted, _LEASE_PASSED)
            recorded = interrupted
        self._state = recorded

    async def _conclude(self, started: StoreState, outcome: StoreState, found: str) -> None:
        """Write ``outcome`` for an initialisation recorded as ``started`` whose own outcome
        was never written, with its record, unless another process did first (then it, or
        whatever replaced it, is read on the next look). A table that fails is logged and
        this process shows ``outcome`` all the same; a Ready process looks no more, so
        another process concludes it then."""
        assert self._shared is not None
        ok = outcome.status is StoreStatus.READY
        record = self._new_record(
            AuditEvent.STORE_INITIALISE,
            "ok" if ok else "failed",
            None if ok else outcome.failure,
            {"concluded": found, "status": outcome.status.value},
        )
        try:
            replaced = await self._shared.replace_store_state(
                self._tenant_id, started, outcome, audit=record
            )
        except Exception as exc:
            _log.warning(
                "an initialisation of the document store of tenant %s left without an outcome "
                "could not be concluded (%s)",
                self._tenant_id,
                type(exc).__name__,
            )
            return
        if replaced:
            await self._forward()

    async def _set(
        self,
        status: StoreStatus,
        *,
        audit: AuditRecord,
        failure: str | None = None,
        remedy: str | None = None,
    ) -> None:
        """Move to ``status``, write it for the other processes with ``audit`` held beside it,
        then forward what the table holds (without a table: record ``audit`` directly)."""
        self._move(status, failure=failure, remedy=remedy)
        if self._shared is None:
            await self._audit.record(audit)
            return
        await self._shared.write_store_state(self._tenant_id, self._state, audit=audit)
        await self._forward()

    async def _forward(self) -> None:
        """Forward what the shared table holds to the sink; a sink that refuses is logged."""
        assert self._shared is not None
        try:
            await forward_audit_outbox(self._shared, self._audit)
        except Exception as exc:
            # Applied and held: the host's forwarder delivers it once the sink takes it.
            _log.warning(
                "the audit record of a document store action is held (%s); it is forwarded "
                "once the audit sink takes records",
                type(exc).__name__,
            )

    async def _settle(
        self,
        status: StoreStatus,
        audit: AuditRecord,
        *,
        failure: str | None = None,
        remedy: str | None = None,
    ) -> None:
        """``_set`` for the background job's outcome, which no caller awaits: a table that
        cannot be written leaves the outcome this process's own, logged, and its record is
        handed to the sink directly."""
        try:
            await self._set(status, audit=audit, failure=failure, remedy=remedy)
        except Exception:
            if self._shared is None:
                # The sink itself refused the record: handing it over again won't do.
                _log.exception(
                    "recording the document store outcome of tenant %s failed", self._tenant_id
                )
                return
            _log.exception(
                "recording the document store state of tenant %s failed", self._tenant_id
            )
            try:
                await self._audit.record(audit)
            except Exception:
                _log.exception(
                    "recording the document store outcome of tenant %s failed", self._tenant_id
                )

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
        """Record what changed nothing (a denial, a refusal, an enable already done)."""
        await self._audit.record(self._audit_record(event, operator, outcome, reason, **extra))

    def _audit_record(
        self,
        event: AuditEvent,
        operator: Operator,
        outcome: str,
        reason: str | None = None,
        **extra: AuditDimension,
    ) -> AuditRecord:
        dimensions = {**operator.audit_dimensions(self._tenant_id), **extra}
        return self._new_record(event, outcome, reason, dimensions)

    def _new_record(
        self,
        event: AuditEvent,
        outcome: str,
        reason: str | None,
        dimensions: dict[str, AuditDimension],
    ) -> AuditRecord:
        """A record of this store's lifecycle, with a fresh ``admin:<uuid>`` correlation id."""
        return AuditRecord(
            event=event,
            tenant_id=self._tenant_id,
            correlation_id=f"admin:{uuid.uuid4().hex}",
            at=self._clock.now(),
            outcome=outcome,
            reason=reason,
            dimensions=dimensions,
        )
