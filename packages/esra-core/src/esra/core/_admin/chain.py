"""The triple-control chain: four services, four roles, one tenant workspace.

``SECURITY_MANAGE`` writes the connection secret → ``ESRA_DATA_MANAGE`` models the source,
mappings and capability → ``GOVERNANCE_MANAGE`` authors the tool's access policy →
``ESRA_EXPOSURE_MANAGE`` binds audience and source subset and publishes. Each service checks
its own role (and nothing else grants it), each step needs the previous one's product, and
every attempt — allowed, denied or rejected — is audited under the tenant it targeted.

No change takes effect while the audit sink refuses records: the sink is asked (its
``ping()``) before anything is saved, and before a secret is written. A publication's save is
itself the effect — followers sharing the state database apply it — so a publish refused for
audit must never reach the store. A saved change's record is held in the state database with
the change, in the same transaction (``esra.core._admin.audit_outbox``), and delivered to the
sink from there: a process killed, or a sink failing, after the save leaves the record held,
never the change unaudited.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Awaitable, Callable, Iterable
from collections.abc import Mapping as AbstractMapping

import attrs

from esra.core._admin.audit_outbox import forward_audit_outbox
from esra.core._admin.publication import (
    ConfigPublisher,
    names_missing_secret,
    publishable_snapshot,
    unwritten_secrets,
)
from esra.core._admin.recording import admin_action_record
from esra.core._admin.roles import Administrator, NotPermittedError, Role
from esra.core._admin.store import ConfigChange, ConfigConflictError, WorkspaceStore
from esra.core._admin.workspace import AdminWorkspace
from esra.core._audit.acceptance import require_accepting
from esra.core._audit.batching import AuditUnavailableError, log_unwritten
from esra.core._audit.record import AuditDimension, AuditRecord
from esra.core._config.access_policy import AccessPolicy
from esra.core._config.capability import Capability
from esra.core._config.connection_credentials import check_no_literal_password
from esra.core._config.exposure import Exposure
from esra.core._config.mapping import Mapping
from esra.core._config.source import Source
from esra.core._identifier_checks import IdentifierCheck
from esra.core.codes import AuditEvent
from esra.core.exceptions import ConfigurationError, EsraError
from esra.core.ports import AuditSink, Clock, SecretStore, WritableSecretStore

__all__ = [
    "AccessPolicyService",
    "ConnectionSecretService",
    "DataModelService",
    "ExposureService",
]

_Change = Callable[[AdminWorkspace], AdminWorkspace]
_Dimensions = Callable[[AdminWorkspace], dict[str, AuditDimension]]
# Given the latest workspace, the next one without a change whose effect failed; None when
# there is nothing left to withdraw (a later change superseded it).
_Withdrawal = Callable[[AdminWorkspace], AdminWorkspace | None]
# A withdrawal that keeps losing races gives up: the failed attempt is audited either way.
_WITHDRAW_ATTEMPTS = 3

_log = logging.getLogger(__name__)


def _failure_reason(exc: Exception) -> str:
    # An audit reason is a classified code: an exception's class or text may be a driver's.
    return exc.code.value if isinstance(exc, EsraError) else "unexpected_error"


class _AdminService:
    """Role check, change, versioned save and audit — shared by the four services.

    A change reads the tenant's workspace at version *v* and saves the next one naming *v*
    (or the ``expected_version`` the caller read earlier, when it gives one), so a change
    that raced another is refused with ``ConfigConflictError`` instead of overwriting it.

    A change with an effect outside the workspace (writing a secret) runs the effect only
    after its save won the version, and asks ``check`` before saving, so whatever the
    effect would refuse is refused before anything is saved. ``check`` is handed the very
    workspace the save will store: what it asks of the world outside (the secret store) is
    asked of that draft, never of one read earlier that a racing change has since replaced.
    An effect that still fails (its backend is down) has its change withdrawn again by
    ``withdraw``: the workspace never claims what did not happen.

    Nothing takes effect unaudited: before the save the audit sink must say it accepts
    records (``require_accepting``), and again before an effect, whose change is withdrawn if it
    no longer does. A refused change raises ``AuditUnavailableError`` with nothing saved and
    its would-be record logged to ``esra.audit.unwritten``. A saved change's ``ok`` record is
    saved with it into the store's audit outbox and then forwarded to the sink; a sink that
    fails after the save leaves it held there (logged at WARNING), to be delivered by the next
    change or the host's next start, and the change is answered as made. A save that fails
    otherwise (the state database down) saved nothing, its record with it: the attempt is
    audited ``failed`` on the sink directly (``_save_failed``) and the save's error raised.
    """

    def __init__(self, workspaces: WorkspaceStore, *, audit: AuditSink, clock: Clock) -> None:
        self._workspaces = workspaces
        self._audit = audit
        self._clock = clock

    async def _current(self, tenant_id: str) -> AdminWorkspace:
        return await self._workspaces.load(tenant_id) or AdminWorkspace(tenant_id=tenant_id)

    async def _attempt(
        self,
        admin: Administrator,
        tenant_id: str,
        role: Role,
        event: AuditEvent,
        change: _Change,
        *,
        target: str,
        dimensions: dict[str, AuditDimension],
        expected_version: int | None,
        reason: str | None,
        dimensions_of: _Dimensions | None = None,
        check: Callable[[AdminWorkspace], Awaitable[None]] | None = None,
        effect: Callable[[], Awaitable[None]] | None = None,
        withdraw: _Withdrawal | None = None,
    ) -> AdminWorkspace:
        dims: dict[str, AuditDimension] = {"subject": admin.subject, "role": role.value}
        dims.update(dimensions)
        current = await self._current(tenant_id)
        if dimensions_of is not None:
            dims.update(dimensions_of(current))
        if not admin.may(role, tenant_id):
            await self._record(event, tenant_id, "denied", "role", dims, by=admin)
            raise NotPermittedError
        if expected_version is not None and expected_version != current.version:
            conflict = ConfigConflictError(
                tenant_id, expected=expected_version, current=current.version
            )
            await self._record(event, tenant_id, "conflict", str(conflict), dims, by=admin)
            raise conflict
        try:
            _check_text("a change reason", reason)
            updated = change(current)
            if check is not None:
                await check(updated)
        except ConfigurationError as exc:
            await self._record(event, tenant_id, "rejected", str(exc), dims, by=admin)
            raise
        except Exception as exc:
            await self._record(event, tenant_id, "failed", _failure_reason(exc), dims, by=admin)
            raise
        try:
            # Before the save: a publication's save is already live for every follower.
            await require_accepting(self._audit)
        except AuditUnavailableError as exc:
            self._unrecorded(event, tenant_id, _failure_reason(exc), dims, by=admin)
            raise
        dims["version"] = updated.version
        saved = self._admin_record(event, tenant_id, "ok", None, dims, by=admin)
        record = ConfigChange(
            tenant_id=tenant_id,
            version=updated.version,
            subject=admin.subject,
            at=self._clock.now(),
            action=event.value,
            target=target,
            reason=reason,
        )
        try:
            # The record is held in the state database with the change, in one transaction:
            # a process killed right after the save still leaves the record to deliver.
            await self._workspaces.save(
                updated, expected_version=current.version, change=record, audit=saved
            )
        except ConfigConflictError as exc:
            del dims["version"]
            await self._record(event, tenant_id, "conflict", str(exc), dims, by=admin)
            raise
        except Exception as exc:
            del dims["version"]
            await self._save_failed(event, tenant_id, exc, dims, by=admin)
            raise
        if effect is not None:
            await self._run_effect(
                admin,
                tenant_id,
                event,
                target=target,
                dims=dims,
                saved=saved,
                effect=effect,
                withdraw=withdraw,
            )
        await self._forward(tenant_id, event, target=target, version=updated.version)
        return updated

    async def _save_failed(
        self,
        event: AuditEvent,
        tenant_id: str,
        error: Exception,
        dimensions: dict[str, AuditDimension],
        *,
        by: Administrator,
    ) -> None:
        """Audit a change whose save failed (not a conflict): ``failed``, nothing saved.

        The record cannot be held in the outbox, which is in the database whose write just
        failed, so it goes to the sink directly. When the sink refuses it too — often the
        same database — it is logged as unwritten: the attempt is never silent, and the
        caller gets the save's own error either way.
        """
        record = self._admin_record(
            event, tenant_id, "failed", _failure_reason(error), dimensions, by=by
        )
        try:
            await self._audit.record(record)
        except Exception as exc:
            log_unwritten([record], f"refused ({type(exc).__name__}) after a failed save")

    async def _run_effect(
        self,
        admin: Administrator,
        tenant_id: str,
        event: AuditEvent,
        *,
        target: str,
        dims: dict[str, AuditDimension],
        saved: AuditRecord,
        effect: Callable[[], Awaitable[None]],
        withdraw: _Withdrawal | None,
    ) -> None:
        """Run a saved change's effect, unless the audit sink stopped accepting records.

        Either way it did not happen, the change is withdrawn (``withdraw``) and the error
        raised, audited ``failed`` in place of the saved change's held ``ok`` record. The
        effect never runs while the sink refuses records.
        """
        # Only after the save won its version: a write refused as stale must not have
        # changed anything outside the workspace (a secret) either.
        try:
            await require_accepting(self._audit)
        except AuditUnavailableError as exc:
            await self._fail_effect(
                admin,
                tenant_id,
                event,
                exc,
                target=target,
                dims=dims,
                saved=saved,
                withdraw=withdraw,
            )
            raise
        try:
            await effect()
        except Exception as exc:
            await self._fail_effect(
                admin,
                tenant_id,
                event,
                exc,
                target=target,
                dims=dims,
                saved=saved,
                withdraw=withdraw,
            )
            raise

    async def _fail_effect(
        self,
        admin: Administrator,
        tenant_id: str,
        event: AuditEvent,
        error: Exception,
        *,
        target: str,
        dims: dict[str, AuditDimension],
        saved: AuditRecord,
        withdraw: _Withdrawal | None,
    ) -> None:
        """Withdraw a change whose effect did not happen and audit it ``failed``.

        The ``failed`` record is held with the withdrawal's save, like any change's, and
        replaces the saved change's ``ok`` record in the outbox. Without a withdrawal (a
        later change superseded it) it goes to the sink directly; if the sink refuses
        records it is logged as unwritten, and the held ``ok`` record of the saved version
        stays to be delivered.
        """
        reason = _failure_reason(error)

        def failed(withdrawn_version: int) -> AuditRecord:
            failed_dims = {**dims, "withdrawn_version": withdrawn_version}
            return self._admin_record(event, tenant_id, "failed", reason, failed_dims, by=admin)

        withdrawn = None
        if withdraw is not None:
            withdrawn = await self._withdraw(
                admin, tenant_id, event, target, withdraw, failed=failed
            )
        if withdrawn is not None:
            await self._settle(saved)
            await self._forward(tenant_id, event, target=target, version=withdrawn)
            return
        if isinstance(error, AuditUnavailableError):
            self._unrecorded(event, tenant_id, reason, dims, by=admin)
            return
        await self._record(event, tenant_id, "failed", reason, dims, by=admin)
        await self._settle(saved)

    async def _settle(self, superseded: AuditRecord) -> None:
        """Drop a held ``ok`` record a ``failed`` one now stands for.

        Kept if the store cannot drop it now: then both are delivered, each true of its
        version, and the caller still sees the effect's own error.
        """
        try:
            await self._workspaces.settle_audit(superseded.correlation_id)
        except Exception as exc:
            _log.warning(
                "the held record of a withdrawn change could not be dropped (%s)",
                type(exc).__name__,
            )

    async def _forward(
        self, tenant_id: str, event: AuditEvent, *, target: str, version: int
    ) -> None:
        """Deliver the held audit records now; a refusing sink leaves them held, not lost.

        The change is saved and its record is held with it, so a sink failing here does not
        fail the change: the record is delivered by the next change's forward or at the
        host's next start.
        """
        try:
            await forward_audit_outbox(self._workspaces, self._audit)
        except Exception as exc:
            _log.warning(
                "an administrative change was saved; its audit record is held in the state "
                "database until the audit sink takes it (%s)",
                type(exc).__name__,
                extra={
                    "tenant_id": tenant_id,
                    "action": event.value,
                    "target": target,
                    "version": version,
                },
            )

    def _unrecorded(
        self,
        event: AuditEvent,
        tenant_id: str,
        reason: str,
        dimensions: dict[str, AuditDimension],
        *,
        by: Administrator,
    ) -> None:
        """Log the ``failed`` record of a change refused because the sink refuses records."""
        record = admin_action_record(
            self._clock,
            event,
            by=by,
            tenant_id=tenant_id,
            outcome="failed",
            reason=reason,
            dimensions=dimensions,
        )
        log_unwritten([record], "refused: the audit sink does not accept records")

    async def _withdraw(
        self,
        admin: Administrator,
        tenant_id: str,
        event: AuditEvent,
        target: str,
        withdraw: _Withdrawal,
        *,
        failed: Callable[[int], AuditRecord],
    ) -> int | None:
        """Save the workspace without a change whose effect failed; the version saved.

        The save holds ``failed(version)``, the attempt's audit record, in the outbox.

        ``None`` when nothing was withdrawn: a later change superseded it, or the workspace
        store failed as well (logged; the effect's own error is what the caller sees).
        """
        for _ in range(_WITHDRAW_ATTEMPTS):
            try:
                current = await self._current(tenant_id)
                withdrawn = withdraw(current)
                if withdrawn is None:
                    return None
                record = ConfigChange(
                    tenant_id=tenant_id,
                    version=withdrawn.version,
                    subject=admin.subject,
                    at=self._clock.now(),
                    action=event.value,
                    target=target,
                    reason="withdrawn: the change's effect failed after it was saved",
                )
                await self._workspaces.save(
                    withdrawn,
                    expected_version=current.version,
                    change=record,
                    audit=failed(withdrawn.version),
                )
            except ConfigConflictError:
                continue
            except Exception:
                _log.warning(
                    "a failed change could not be withdrawn",
                    exc_info=True,
                    extra={"tenant_id": tenant_id, "action": event.value, "target": target},
                )
                return None
            return withdrawn.version
        _log.warning(
            "a failed change could not be withdrawn: the workspace kept changing",
            extra={"tenant_id": tenant_id, "action": event.value, "target": target},
        )
        return None

    def _admin_record(
        self,
        event: AuditEvent,
        tenant_id: str,
        outcome: str,
        reason: str | None,
        dimensions: dict[str, AuditDimension],
        *,
        by: Administrator,
    ) -> AuditRecord:
        return admin_action_record(
            self._clock,
            event,
            by=by,
            tenant_id=tenant_id,
            outcome=outcome,
            reason=reason,
            dimensions=dimensions,
        )

    async def _record(
        self,
        event: AuditEvent,
        tenant_id: str,
        outcome: str,
        reason: str | None,
        dimensions: dict[str, AuditDimension],
        *,
        by: Administrator,
    ) -> None:
        await self._audit.record(
            self._admin_record(event, tenant_id, outcome, reason, dimensions, by=by)
        )


def _check_text(what: str, text: str | None) -> None:
    """Refuse NUL in text a change stores beside its configuration (a reason, a reference).

    PostgreSQL text and ``jsonb`` cannot hold it: the save would fail with a driver's error.
    The configuration itself is refused NUL by the converter, where it is read.
    """
    if text is not None and "\x00" in text:
        raise ConfigurationError(f"{what} must not contain NUL (U+0000)")


def _template_changes(before: Iterable[Mapping], after: Iterable[Mapping]) -> tuple[str, ...]:
    """``{mapping_id}:{fingerprint}`` for each mapping whose record-filter template changes.

    A fingerprint (not the text) ties the audit record to the versioned configuration without
    copying a security predicate into every audit sink.
    """
    old = {m.id: m.record_filter_template for m in before}
    new = {m.id: m.record_filter_template for m in after}
    changes = []
    for mapping_id in sorted(old.keys() | new.keys()):
        template = new.get(mapping_id)
        if old.get(mapping_id) != template:
            # surrogatepass: an unparseable template is still fingerprinted, then rejected.
            data = template.encode("utf-8", "surrogatepass") if template is not None else None
            digest = hashlib.sha256(data).hexdigest()[:12] if data is not None else "none"
            changes.append(f"{mapping_id}:{digest}")
    return tuple(changes)


def _own_tenant(tenant_id: str, *objects: Source | Mapping | Capability | Exposure) -> None:
    for obj in objects:
        if obj.tenant_id != tenant_id:
            msg = f"{type(obj).__name__} {obj.id!r} belongs to another tenant"
            raise ConfigurationError(msg)


class ConnectionSecretService(_AdminService):
    """Step 1, ``SECURITY_MANAGE``: create or rotate a tenant's connection secret."""

    def __init__(
        self,
        workspaces: WorkspaceStore,
        secrets: WritableSecretStore,
        *,
        audit: AuditSink,
        clock: Clock,
    ) -> None:
        super().__init__(workspaces, audit=audit, clock=clock)
        self._secrets = secrets

    async def put_secret(
        self,
        admin: Administrator,
        tenant_id: str,
        reference: str,
        value: str,
        *,
        expected_version: int | None = None,
        reason: str | None = None,
    ) -> AdminWorkspace:
        """Write ``value`` under ``reference``; the workspace records only the reference.

        ``expected_version`` (every service takes it) is the workspace version the caller
        read; a workspace that moved on since raises ``ConfigConflictError``. ``reason`` is
        recorded with the change.

        A write the secret store refuses (``check_put``: an ``env:``/``file:`` reference, a
        value it cannot hold) raises ``ConfigurationError`` and changes nothing. A write
        that fails after the change was saved is withdrawn again in a further version, so
        no source can be modelled on a secret that was never written.
        """

        previous: int | None = None

        def change(ws: AdminWorkspace) -> AdminWorkspace:
            nonlocal previous
            if not reference:
                raise ConfigurationError("a secret reference must not be empty")
            _check_text("a secret reference", reference)
            previous = ws.secret_rotations.get(reference)
            rotations = dict(ws.secret_rotations)
            rotations[reference] = (previous or 0) + 1
            return ws.next(secret_rotations=rotations)

        async def check(_saved: AdminWorkspace) -> None:
            await self._secrets.check_put(tenant_id, reference, value)

        async def effect() -> None:
            await self._secrets.put(tenant_id, reference, value)

        def withdraw(ws: AdminWorkspace) -> AdminWorkspace | None:
            rotations = dict(ws.secret_rotations)
            if rotations.get(reference) != (previous or 0) + 1:
                return None  # rotated again since: that later write is the one that stands
            if previous is None:
                del rotations[reference]
            else:
                rotations[reference] = previous
            return ws.next(secret_rotations=rotations)

        return await self._attempt(
            admin,
            tenant_id,
            Role.SECURITY_MANAGE,
            AuditEvent.ADMIN_SECRET_WRITE,
            change,
            target=reference,
            dimensions={"reference": reference},
            expected_version=expected_version,
            reason=reason,
            check=check,
            effect=effect,
            withdraw=withdraw,
        )


class DataModelService(_AdminService):
    """Step 2, ``ESRA_DATA_MANAGE``: sources, mappings, fields and capabilities.

    ``secrets``, when given, is asked whether each stored secret a modelled source names is
    really stored (``unwritten_secrets``), not only whether the workspace recorded its write.
    """

    def __init__(
        self,
        workspaces: WorkspaceStore,
        *,
        audit: AuditSink,
        clock: Clock,
        secrets: SecretStore | None = None,
    ) -> None:
        super().__init__(workspaces, audit=audit, clock=clock)
        self._stored = secrets

    async def view(self, admin: Administrator, tenant_id: str) -> AdminWorkspace:
        """Return the tenant's workspace; needs ``ESRA_DATA_READ`` (audited, denials too)."""
        dims: dict[str, AuditDimension] = {
            "subject": admin.subject,
            "role": Role.ESRA_DATA_READ.value,
        }
        if not admin.may(Role.ESRA_DATA_READ, tenant_id):
            await self._record(
                AuditEvent.ADMIN_WORKSPACE_VIEW, tenant_id, "denied", "role", dims, by=admin
            )
            raise NotPermittedError
        await self._record(AuditEvent.ADMIN_WORKSPACE_VIEW, tenant_id, "ok", None, dims, by=admin)
        return await self._current(tenant_id)

    async def history(self, admin: Administrator, tenant_id: str) -> list[ConfigChange]:
        """Every saved change of the tenant's configuration; needs ``ESRA_DATA_READ``."""
        dims: dict[str, AuditDimension] = {
            "subject": admin.subject,
            "role": Role.ESRA_DATA_READ.value,
            "part": "history",
        }
        if not admin.may(Role.ESRA_DATA_READ, tenant_id):
            await self._record(
                AuditEvent.ADMIN_WORKSPACE_VIEW, tenant_id, "denied", "role", dims, by=admin
            )
            raise NotPermittedError
        await self._record(AuditEvent.ADMIN_WORKSPACE_VIEW, tenant_id, "ok", None, dims, by=admin)
        return await self._workspaces.history(tenant_id)

    async def model_source(
        self,
        admin: Administrator,
        tenant_id: str,
        source: Source,
        mappings: Iterable[Mapping] = (),
        *,
        expected_version: int | None = None,
        reason: str | None = None,
    ) -> AdminWorkspace:
        """Add or replace ``source`` with exactly ``mappings``; its secret must exist.

        Its connection template names its password as a secret reference: a literal one is
        refused (``check_no_literal_password``), so it never reaches the draft or history.

        The audit record's ``record_filter_templates`` dimension lists every mapping whose
        record-filter template this change adds, alters or removes, as
        ``{mapping_id}:{fingerprint}`` (``none`` once removed), never the template text.
        """
        new_mappings = tuple(mappings)
        unwritten = await _unwritten(self._stored, tenant_id, (source,))

        def change(ws: AdminWorkspace) -> AdminWorkspace:
            _own_tenant(tenant_id, source, *new_mappings)
            check_no_literal_password(source)
            if unwritten or names_missing_secret(source.connection_ref, ws.secret_rotations):
                raise ConfigurationError(f"source {source.id!r} names a missing connection secret")
            if any(m.source_id != source.id for m in new_mappings):
                raise ConfigurationError("every mapping must belong to the modelled source")
            snap = ws.snapshot
            snapshot = attrs.evolve(
                snap,
                sources=(*(s for s in snap.sources if s.id != source.id), source),
                mappings=(*(m for m in snap.mappings if m.source_id != source.id), *new_mappings),
            )
            return ws.next(snapshot=snapshot)

        return await self._attempt(
            admin,
            tenant_id,
            Role.ESRA_DATA_MANAGE,
            AuditEvent.ADMIN_SOURCE_MODEL,
            change,
            target=source.id,
            dimensions={"source_id": source.id, "mappings": len(new_mappings)},
            dimensions_of=lambda ws: {
                "record_filter_templates": _template_changes(
                    ws.snapshot.mappings_of(source.id), new_mappings
                )
            },
            expected_version=expected_version,
            reason=reason,
        )

    async def define_capability(
        self,
        admin: Administrator,
        tenant_id: str,
        capability: Capability,
        *,
        expected_version: int | None = None,
        reason: str | None = None,
    ) -> AdminWorkspace:
        """Add or replace ``capability``; every source it binds must be modelled."""

        def change(ws: AdminWorkspace) -> AdminWorkspace:
            _own_tenant(tenant_id, capability)
            snap = ws.snapshot
            capabilities = (*(c for c in snap.capabilities if c.id != capability.id), capability)
            return ws.next(snapshot=attrs.evolve(snap, capabilities=capabilities))

        return await self._attempt(
            admin,
            tenant_id,
            Role.ESRA_DATA_MANAGE,
            AuditEvent.ADMIN_CAPABILITY_DEFINE,
            change,
            target=capability.id,
            dimensions={"capability_id": capability.id},
            expected_version=expected_version,
            reason=reason,
        )


class AccessPolicyService(_AdminService):
    """Step 3, ``GOVERNANCE_MANAGE``: the access policy of an exposure's tool."""

    async def author_policy(
        self,
        admin: Administrator,
        tenant_id: str,
        policy: AccessPolicy,
        *,
        expected_version: int | None = None,
        reason: str | None = None,
    ) -> AdminWorkspace:
        """Add or replace the policy for ``policy.slug``; its capability must be modelled."""

        def change(ws: AdminWorkspace) -> AdminWorkspace:
            if policy.tenant_id != tenant_id:
                raise ConfigurationError(f"policy {policy.slug!r} belongs to another tenant")
            if ws.snapshot.capability(policy.capability_id) is None:
                raise ConfigurationError(f"policy {policy.slug!r} names an unknown capability")
            snap = ws.snapshot
            policies = (*(p for p in snap.access_policies if p.slug != policy.slug), policy)
            return ws.next(snapshot=attrs.evolve(snap, access_policies=policies))

        return await self._attempt(
            admin,
            tenant_id,
            Role.GOVERNANCE_MANAGE,
            AuditEvent.ADMIN_POLICY_AUTHOR,
            change,
            target=policy.slug,
            dimensions={"slug": policy.slug, "capability_id": policy.capability_id},
            expected_version=expected_version,
            reason=reason,
        )


class ExposureService(_AdminService):
    """Step 4, ``ESRA_EXPOSURE_MANAGE``: bind audience and source subset, then publish."""

    def __init__(
        self,
        workspaces: WorkspaceStore,
        publisher: ConfigPublisher,
        *,
        audit: AuditSink,
        clock: Clock,
        secrets: SecretStore | None = None,
        identifier_checks: AbstractMapping[str, IdentifierCheck] | None = None,
    ) -> None:
        super().__init__(workspaces, audit=audit, clock=clock)
        self._publisher = publisher
        self._stored = secrets
        self._identifier_checks = identifier_checks
        # The latest version handed to the publisher, per tenant: see ``_hand_over``.
        self._handed: dict[str, int] = {}

    async def bind_exposure(
        self,
        admin: Administrator,
        tenant_id: str,
        exposure: Exposure,
        *,
        expected_version: int | None = None,
        reason: str | None = None,
    ) -> AdminWorkspace:
        """Add or replace ``exposure`` as a draft; its tool's access policy must exist."""

        def change(ws: AdminWorkspace) -> AdminWorkspace:
            _own_tenant(tenant_id, exposure)
            policy = ws.snapshot.access_policy(exposure.slug)
            if policy is None:
                raise ConfigurationError(f"exposure {exposure.slug!r} has no access policy")
            if policy.capability_id != exposure.capability_id:
                raise ConfigurationError(
                    f"exposure {exposure.slug!r} and its policy name different capabilities"
                )
            draft = attrs.evolve(exposure, published=False)
            snap = ws.snapshot
            exposures = (*(e for e in snap.exposures if e.id != exposure.id), draft)
            return ws.next(snapshot=attrs.evolve(snap, exposures=exposures))

        return await self._attempt(
            admin,
            tenant_id,
            Role.ESRA_EXPOSURE_MANAGE,
            AuditEvent.ADMIN_EXPOSURE_BIND,
            change,
            target=exposure.slug,
            dimensions={"slug": exposure.slug, "audience": tuple(sorted(exposure.audience))},
            expected_version=expected_version,
            reason=reason,
        )

    async def publish(
        self,
        admin: Administrator,
        tenant_id: str,
        slug: str,
        *,
        expected_version: int | None = None,
        reason: str | None = None,
    ) -> AdminWorkspace:
        """Re-validate the draft, mark ``slug`` published and hand the snapshot to the runtime.

        The store keeps the published snapshot under its version, in the same write as the
        workspace, before the runtime is told. With ``secrets`` given, every stored secret
        the draft's sources name must be stored (``unwritten_secrets``). Every mapping's
        physical names are asked of its source kind's identifier check (``identifier_checks``,
        default: what the installed provider factories state).
        """

        def change(ws: AdminWorkspace) -> AdminWorkspace:
            snapshot = publishable_snapshot(ws, slug, identifier_checks=self._identifier_checks)
            return ws.next(snapshot=snapshot, published=True)

        async def check(published: AdminWorkspace) -> None:
            # Asked of the draft being published: the save is refused if any other change
            # lands after this read, so no source reaches the runtime unchecked.
            sources = published.snapshot.sources
            unwritten = await _unwritten(self._stored, tenant_id, sources)
            if unwritten:
                msg = f"the draft names connection secrets that are not stored: {sorted(unwritten)}"
                raise ConfigurationError(msg)

        updated = await self._attempt(
            admin,
            tenant_id,
            Role.ESRA_EXPOSURE_MANAGE,
            AuditEvent.ADMIN_EXPOSURE_PUBLISH,
            change,
            target=slug,
            dimensions={"slug": slug},
            expected_version=expected_version,
            reason=reason,
            check=check,
        )
        self._hand_over(updated)
        return updated

    def _hand_over(self, published: AdminWorkspace) -> None:
        """Hand ``published`` to the runtime, unless a later publication was handed first.

        A publish awaits between its save and this call, so two racing publications may
        arrive here out of order; handing the earlier one last would serve an older snapshot
        than the one the store holds as current. No await between the check and the call.
        """
        tenant_id = published.tenant_id
        if published.version <= self._handed.get(tenant_id, 0):
            return
        self._handed[tenant_id] = published.version
        self._publisher.publish(published.snapshot)


async def _unwritten(
    secrets: SecretStore | None, tenant_id: str, sources: Iterable[Source]
) -> frozenset[str]:
    return frozenset() if secrets is None else await unwritten_secrets(secrets, tenant_id, sources)
