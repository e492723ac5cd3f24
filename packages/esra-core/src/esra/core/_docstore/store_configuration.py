"""A store's "configure" action: the settings an operator may change, persisted and audited.

Spec 004 lists a store's own settings — what to do with a document the injection scanner
flags (quarantine, reject, index anyway), whether original bytes are kept once indexed, how
many extraction attempts a document gets, and how many documents a worker takes per tenant
per turn. They live in the store's own database (``DocumentRepository.load_configuration`` /
``save_configuration``), so every host and worker on that store reads the same values, a
change applies on the worker's next turn without a restart, and it survives ``kill -9``.

A tenant that never configured its store runs on the host's defaults (revision 0). Each
change names the revision it was made against (optimistic concurrency: two operators
editing at once cannot silently overwrite each other, ``ESRA_CONFIG_CONFLICT``), needs
``ESRA_DATA_MANAGE`` and is audited as ``esra.store.configure`` with the settings before and
after; reading needs ``ESRA_DATA_READ``. A refused attempt is audited too, with its
classification as the record's reason: ``denied`` (``role``), ``rejected`` (the error's
code, and the setting it names), ``conflict``; and a host that refuses a change before it
reaches the service (a malformed body or header) records it through ``refused``, so every
refusal has the one shape whichever layer made it. A change's ``ok``
record is written into the store's audit outbox in the transaction that saves the change
(``save_configuration(..., audit=)``) and forwarded to the audit sink from there, so a sink
failing, or a process killed, after the save never leaves the change unaudited.

The worker's lease and heartbeat are properties of the worker process, not of the tenant's
store, so they are not configurable here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Literal, Protocol

import attrs

from esra.core._admin.audit_outbox import AuditOutbox, forward_audit_outbox
from esra.core._admin.roles import NotPermittedError, Role
from esra.core._audit.acceptance import require_accepting
from esra.core._audit.record import AuditDimension, AuditRecord
from esra.core._docstore.model import StoreSettings
from esra.core._docstore.scanner import ScanPolicy
from esra.core.codes import AuditEvent, ErrorCode
from esra.core.exceptions import EsraError, InvalidRequestError
from esra.core.ports import AuditSink, Clock

__all__ = [
    "CONFIGURABLE_FIELDS",
    "MAX_ATTEMPTS_CEILING",
    "MAX_BATCH_CEILING",
    "ConfigurableSettings",
    "StoreConfiguration",
    "StoreConfigurationService",
    "StoreSettingsConflictError",
    "StoreSettingsError",
]

_log = logging.getLogger(__name__)

# Past a hundred attempts a document is not flaky, it is poison; past a thousand documents a
# turn, one tenant's batch starves the others' (the worker is fair per turn, not per document).
MAX_ATTEMPTS_CEILING = 100
MAX_BATCH_CEILING = 1000


class StoreSettingsError(InvalidRequestError):
    """A settings change is malformed; ``parameter`` names the setting (as the API spells it)."""

    def __init__(self, parameter: str, message: str) -> None:
        self.parameter = parameter
        self.public_message = message
        super().__init__(message)


class StoreSettingsConflictError(EsraError):
    """The settings changed since the operator read them; nothing was written."""

    code = ErrorCode.ESRA_CONFIG_CONFLICT
    public_message = "The store's settings changed since they were read; reload them and retry."

    def __init__(self, *, expected: int, current: int) -> None:
        self.expected = expected
        self.current = current
        super().__init__(
            f"settings are at revision {current}, the change was made against {expected}"
        )


# Structural types, so this module needs neither the repository port nor the management
# module (which imports it for the operator): what the service calls, and nothing more.
class _Operator(Protocol):
    @property
    def subject(self) -> str: ...

    @property
    def tenant_id(self) -> str: ...

    def may(self, role: Role) -> bool: ...

    def require(self, role: Role) -> None: ...

    def audit_dimensions(self) -> dict[str, AuditDimension]: ...


class _Row(Protocol):
    def __getitem__(self, column: str) -> Any: ...


class _ConfigurationStore(AuditOutbox, Protocol):
    async def load_configuration(self, tenant_id: str) -> StoreConfiguration | None: ...

    async def save_configuration(
        self,
        tenant_id: str,
        settings: ConfigurableSettings,
        *,
        expected_revision: int,
        by: str,
        now: datetime,
        audit: Callable[[StoreConfiguration], AuditRecord] | None = None,
    ) -> StoreConfiguration | None: ...


def _within(low: int, high: int) -> Callable[[object, attrs.Attribute[int], int], None]:
    def check(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise StoreSettingsError(
                attribute.name, f"{attribute.name} is a whole number from {low} to {high}."
            )

    return check


def _scan_policy(value: object) -> ScanPolicy:
    if isinstance(value, str) and value in _SCAN_POLICIES:
        return ScanPolicy(value)
    choices = ", ".join(sorted(_SCAN_POLICIES))
    raise StoreSettingsError("scan_policy", f"scan_policy is one of {choices}.")


_SCAN_POLICIES = frozenset(p.value for p in ScanPolicy)


def _flag(_instance: object, attribute: attrs.Attribute[bool], value: bool) -> None:
    if not isinstance(value, bool):
        raise StoreSettingsError(attribute.name, f"{attribute.name} is true or false.")


@attrs.frozen
class ConfigurableSettings:
    """The part of ``StoreSettings`` an operator configures per tenant.

    Raises:
        StoreSettingsError: a value of the wrong type or outside its range, named.
    """

    scan_policy: ScanPolicy = attrs.field(default=ScanPolicy.QUARANTINE, converter=_scan_policy)
    retain_bytes: bool = attrs.field(default=True, validator=_flag)
    max_attempts: int = attrs.field(default=3, validator=_within(1, MAX_ATTEMPTS_CEILING))
    batch_per_tenant: int = attrs.field(default=20, validator=_within(1, MAX_BATCH_CEILING))

    @classmethod
    def of(cls, settings: StoreSettings) -> ConfigurableSettings:
        """The configurable part of ``settings``."""
        return cls(
            scan_policy=settings.scan_policy,
            retain_bytes=settings.retain_bytes,
            max_attempts=settings.max_attempts,
            batch_per_tenant=settings.batch_per_tenant,
        )

    def applied_to(self, settings: StoreSettings) -> StoreSettings:
        """``settings`` (the worker's: lease, heartbeat) with these values in place."""
        return attrs.evolve(
            settings,
            scan_policy=self.scan_policy,
            retain_bytes=self.retain_bytes,
            max_attempts=self.max_attempts,
            batch_per_tenant=self.batch_per_tenant,
        )

    def changed(self, changes: Mapping[str, object]) -> ConfigurableSettings:
        """These settings with ``changes`` (setting name → new value) applied.

        Raises:
            StoreSettingsError: an unknown setting, or a value the setting refuses.
        """
        for name in changes:
            if name not in CONFIGURABLE_FIELDS:
                shown = name if name.isprintable() and len(name) <= 32 else "setting"
                raise StoreSettingsError(
                    shown,
                    f"Unknown setting {shown!r}; use {', '.join(sorted(CONFIGURABLE_FIELDS))}.",
                )
        # Every value is checked by the field it lands in (converter or validator).
        return attrs.evolve(self, **changes)  # type: ignore[arg-type]

    def described(self) -> str:
        """One line naming every value, for the audit record (no free text: all enumerated)."""
        return (
            f"scan_policy={self.scan_policy.value} "
            f"retain_bytes={'true' if self.retain_bytes else 'false'} "
            f"max_attempts={self.max_attempts} batch_per_tenant={self.batch_per_tenant}"
        )


CONFIGURABLE_FIELDS = frozenset(a.name for a in attrs.fields(ConfigurableSettings))


@attrs.frozen
class StoreConfiguration:
    """A tenant's store settings as stored: revision 0 means never configured (defaults)."""

    settings: ConfigurableSettings
    revision: int = 0
    updated_at: datetime | None = None
    updated_by: str | None = None

    @classmethod
    def from_row(cls, row: _Row) -> StoreConfiguration:
        """The configuration a repository's ``store_settings`` row holds (by column name)."""
        updated_at = row["updated_at"]
        if isinstance(updated_at, str):  # SQLite keeps ISO-8601 text; PostgreSQL a datetime
            updated_at = datetime.fromisoformat(updated_at)
        return cls(
            ConfigurableSettings(
                scan_policy=ScanPolicy(row["scan_policy"]),
                retain_bytes=bool(row["retain_bytes"]),
                max_attempts=int(row["max_attempts"]),
                batch_per_tenant=int(row["batch_per_tenant"]),
            ),
            revision=int(row["revision"]),
            # SQLite keeps ISO-8601 text; PostgreSQL hands back a datetime.
            updated_at=datetime.fromisoformat(updated_at)
            if isinstance(updated_at, str)
            else updated_at,
            updated_by=row["updated_by"],
        )


class StoreConfigurationService:
    """Reads and changes one store's settings, role-checked and audited.

    Args:
        repository: the store (its ``load_configuration`` / ``save_configuration``).
        audit: where each change, and each refused one, is recorded.
        clock: the time a change is made.
        defaults: what a tenant that never configured its store runs on (the host's).
    """

    def __init__(
        self,
        repository: _ConfigurationStore,
        *,
        audit: AuditSink,
        clock: Clock,
        defaults: ConfigurableSettings | None = None,
    ) -> None:
        self._repository = repository
        self._audit = audit
        self._clock = clock
        self._defaults = defaults or ConfigurableSettings()

    @property
    def defaults(self) -> ConfigurableSettings:
        """What a tenant that never configured its store runs on."""
        return self._defaults

    async def current(self, operator: _Operator) -> StoreConfiguration:
        """The operator's tenant's settings (the defaults at revision 0 if never configured).

        Raises:
            NotPermittedError: without ``ESRA_DATA_READ``.
        """
        operator.require(Role.ESRA_DATA_READ)
        return await self._load(operator.tenant_id)

    async def configure(
        self, operator: _Operator, changes: Mapping[str, object], *, expected_revision: int
    ) -> StoreConfiguration:
        """Apply ``changes`` to the settings at ``expected_revision``; audited before/after.

        Raises:
            NotPermittedError: without ``ESRA_DATA_MANAGE`` (audited as denied).
            StoreSettingsError: an unknown setting or a refused value (audited as rejected).
            StoreSettingsConflictError: the settings are no longer at ``expected_revision``
                (audited as conflict); nothing was written.
        """
        if not operator.may(Role.ESRA_DATA_MANAGE):
            await self._record(operator, "denied", reason="role")
            raise NotPermittedError
        before = await self._load(operator.tenant_id)
        try:
            after = before.settings.changed(changes)
        except StoreSettingsError as exc:
            await self._record(operator, "rejected", reason=exc.code.value, setting=exc.parameter)
            raise
        if expected_revision != before.revision:
            await self._record(operator, "conflict", reason=ErrorCode.ESRA_CONFIG_CONFLICT.value)
            raise StoreSettingsConflictError(expected=expected_revision, current=before.revision)
        # Settings every worker applies are not changed while their record cannot be written.
        await require_accepting(self._audit)
        now = self._clock.now()
        saved = await self._repository.save_configuration(
            operator.tenant_id,
            after,
            expected_revision=expected_revision,
            by=operator.subject,
            now=now,
            # Held in the store's audit outbox with the change, forwarded below.
            audit=lambda stored: self._audit_record(
                operator,
                "ok",
                now,
                before=before.settings.described(),
                after=stored.settings.described(),
                revision=stored.revision,
            ),
        )
        if saved is None:
            # Another change landed between our read and our write: the store decided.
            current = await self._load(operator.tenant_id)
            await self._record(operator, "conflict", reason=ErrorCode.ESRA_CONFIG_CONFLICT.value)
            raise StoreSettingsConflictError(expected=expected_revision, current=current.revision)
        await self._forward(operator)
        return saved

    async def refused(
        self, operator: _Operator, outcome: Literal["rejected", "conflict"], *, reason: str
    ) -> None:
        """Record a change the host refused before it reached :meth:`configure`.

        For a role holder's request the host could not make a change of — a body that is not
        a JSON object, an unknown setting, an If-Match naming no revision, a store not Ready.
        ``reason`` is the refusal's classification (an error code), never the request's
        text: what a refused request holds is not to be trusted, nor kept.
        """
        await self._record(operator, outcome, reason=reason)

    async def _forward(self, operator: _Operator) -> None:
        """Hand the held audit records (this change's among them) to the audit sink.

        The change is saved and its record held with it, so a sink failing here does not
        fail the change: the record is delivered by the next forward (the next action's on
        the store, the host's next start, or its timer).
        """
        try:
            await forward_audit_outbox(self._repository, self._audit)
        except Exception as exc:
            _log.warning(
                "the store settings were changed; the change's audit record is held in the "
                "store's database until the audit sink takes it (%s)",
                type(exc).__name__,
                extra={"tenant_id": operator.tenant_id, "action": AuditEvent.STORE_CONFIGURE.value},
            )

    async def _load(self, tenant_id: str) -> StoreConfiguration:
        stored = await self._repository.load_configuration(tenant_id)
        return stored if stored is not None else StoreConfiguration(self._defaults)

    async def _record(
        self,
        operator: _Operator,
        outcome: str,
        *,
        reason: str | None = None,
        **details: AuditDimension,
    ) -> None:
        await self._audit.record(
            self._audit_record(operator, outcome, self._clock.now(), reason=reason, **details)
        )

    @staticmethod
    def _audit_record(
        operator: _Operator,
        outcome: str,
        at: datetime,
        *,
        reason: str | None = None,
        **details: AuditDimension,
    ) -> AuditRecord:
        # Who acted, and for an operator of another tenant its home tenant too.
        dimensions = operator.audit_dimensions()
        dimensions.update(details)
        return AuditRecord(
            event=AuditEvent.STORE_CONFIGURE,
            tenant_id=operator.tenant_id,
            correlation_id=f"{AuditEvent.STORE_CONFIGURE.value}:{operator.subject}",
            at=at,
            outcome=outcome,
            reason=reason,
            dimensions=dimensions,
        )
