"""The reusable ``WorkspaceStore`` contract suite: every rule of the port, one set of tests.

An adapter's test module subclasses ``WorkspaceStoreContract`` and implements
``make_store`` — a fresh, empty store (or an awaitable of one) — and ``open_twin``, a second,
independent handle (its own connection) on the very same storage, which the concurrency tests
race against the first::

    class TestMyStoreContract(WorkspaceStoreContract):
        def make_store(self, tmp_path):
            return MyStore(tmp_path / "config.db")

        def open_twin(self, store):
            return MyStore(store.path)

Handles are closed after the test through their ``close()``, if they have one.
Requires ``pytest`` and ``pytest-asyncio``.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import attrs
import pytest

from esra.core._admin.audit_outbox import forward_audit_outbox
from esra.core._admin.store import (
    ConfigChange,
    ConfigConflictError,
    WorkspaceStore,
    adopt,
)
from esra.core._admin.workspace import AdminWorkspace
from esra.core._audit.record import AuditRecord
from esra.core._config.access_policy import AccessPolicy
from esra.core._config.capability import (
    BindingMode,
    Capability,
    CapabilityLimits,
    ResponseMode,
    SourceBinding,
)
from esra.core._config.converter import dump_snapshot
from esra.core._config.exposure import Exposure, RetentionClass
from esra.core._config.mapping import (
    DefaultTemplate,
    FieldSpec,
    FieldType,
    Mapping,
    MaskingKind,
    MaskingRule,
    Operator,
    RecordFilter,
)
from esra.core._config.snapshot import ConfigSnapshot
from esra.core._config.source import Source, SourcePolicy
from esra.core.codes import AuditEvent, ErrorCode

__all__ = ["WorkspaceStoreContract", "contract_snapshot"]

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
TENANT = "tenant-a"
OTHER = "tenant-b"
SECRET_REF = "secret://hr-db"


def contract_snapshot(tenant_id: str = TENANT, version: str = "1") -> ConfigSnapshot:
    """A snapshot using every part of the configuration model, non-default values throughout."""
    fields = (
        FieldSpec("title", "col_title", is_searchable=True, is_returnable=True),
        FieldSpec("body", "col_body", is_searchable=True, is_returnable=True, description="Text."),
        FieldSpec(
            "region",
            "col_region",
            is_filterable=True,
            is_restricted=True,
            allowed_operators=frozenset({Operator.EQ, Operator.IN}),
        ),
        FieldSpec("salary", "col_salary", type=FieldType.NUMBER, is_returnable=True),
        FieldSpec("updated", "col_updated", type=FieldType.DATE, is_filterable=True),
        FieldSpec("archived", "col_archived", type=FieldType.BOOLEAN, is_filterable=True),
    )
    source = Source(
        id="s-hr",
        tenant_id=tenant_id,
        name="HR policies",
        description="Policies for staff — in «quotes» and ünïcode.",
        provider_kind="postgres",
        connection_ref=SECRET_REF,
        usage_guidance="Leave, travel, expenses.",
        domain_tags=("hr", "policy"),
        languages=("en", "de"),
        example_prompts=("How much leave do I get?",),
        freshness="daily",
        priority_weight=1.5,
        max_queries_per_source=5,
        policy=SourcePolicy(allowed_client_apps=frozenset({"app-1", "app-2"})),
        answer_permitted=True,
    )
    mapping = Mapping(
        id="m-hr",
        tenant_id=tenant_id,
        source_id=source.id,
        business_name="Policy documents",
        description="One row per policy section.",
        relation="policies",
        schema="hr",
        text_index="policies_tsv",
        record_key="id",
        title_field="title",
        content_fields=("body",),
        fields=fields,
        masking=(MaskingRule("salary", MaskingKind.FULL),),
        record_filters=(RecordFilter("region", "region", Operator.EQ),),
        record_filter_template="region = {claim:region} OR NOT archived = TRUE",
        freshness_field="updated",
        default_template=DefaultTemplate(limit=7, fields=("title", "body")),
    )
    capability = Capability(
        id="cap-hr",
        tenant_id=tenant_id,
        name="HR search",
        bindings=(SourceBinding(source.id, BindingMode.MANDATORY),),
        response_modes=frozenset({ResponseMode.RESULTS, ResponseMode.ANSWER}),
        limits=CapabilityLimits(max_rows_per_query=20, result_cache_ttl_s=30.0),
        model_profile="small",
        datamark_untrusted=True,
    )
    exposure = Exposure(
        id="exp-hr",
        tenant_id=tenant_id,
        slug="hr_search",
        capability_id=capability.id,
        audience=frozenset({"app-1"}),
        source_subset=frozenset({source.id}),
        published=True,
        fetch_enabled=True,
        top_k=12,
        retention=RetentionClass.NO_PROMPT_DERIVATIVES,
    )
    policy = AccessPolicy(
        tenant_id=tenant_id,
        slug=exposure.slug,
        capability_id=capability.id,
        allowed_client_apps=frozenset({"app-1"}),
        required_claims=frozenset({"region"}),
    )
    return ConfigSnapshot(
        tenant_id=tenant_id,
        version=version,
        sources=(source,),
        mappings=(mapping,),
        capabilities=(capability,),
        exposures=(exposure,),
        access_policies=(policy,),
    )


def _change(
    workspace: AdminWorkspace, *, subject: str = "alice", reason: str | None = None
) -> ConfigChange:
    return ConfigChange(
        tenant_id=workspace.tenant_id,
        version=workspace.version,
        subject=subject,
        at=T0 + timedelta(minutes=workspace.version),
        action="esra.admin.source.model",
        target="s-hr",
        reason=reason,
    )


def _first(tenant_id: str = TENANT) -> AdminWorkspace:
    """Version 1: the secret exists (an empty draft otherwise)."""
    return AdminWorkspace(tenant_id=tenant_id).next(secret_rotations={SECRET_REF: 1})


def _drafted(previous: AdminWorkspace, *, published: bool = False) -> AdminWorkspace:
    """One version later with the full snapshot as its draft."""
    snapshot = contract_snapshot(previous.tenant_id)
    return previous.next(snapshot=snapshot, published=published)


def _record(version: int) -> AuditRecord:
    """The audit record of the change that saved ``version`` (a tuple dimension included)."""
    return AuditRecord(
        event=AuditEvent.ADMIN_EXPOSURE_PUBLISH,
        tenant_id=TENANT,
        correlation_id=f"admin:contract-{version}",
        at=T0 + timedelta(minutes=version),
        dimensions={"subject": "alice", "version": version, "audience": ("hr", "legal")},
    )


StoreOpener = Callable[[], Awaitable[WorkspaceStore]]


async def hold_audit_records(store: WorkspaceStore, count: int) -> list[AuditRecord]:
    """Save ``count`` versions, each holding its change's audit record; return them in order."""
    workspace = _first()
    await store.save(workspace, expected_version=0, change=_change(workspace), audit=_record(1))
    for version in range(2, count + 1):
        workspace = _drafted(workspace)
        await store.save(
            workspace,
            expected_version=version - 1,
            change=_change(workspace),
            audit=_record(version),
        )
    return [_record(version) for version in range(1, count + 1)]


@attrs.define
class _SlowSink:
    """Takes each record after a pause, into a log shared by every sink of the test."""

    taken: list[str]
    pause_s: float = 0.01

    async def record(self, record: AuditRecord) -> None:
        await asyncio.sleep(self.pause_s)
        self.taken.append(record.correlation_id)


@pytest.mark.asyncio
class WorkspaceStoreContract:
    """Tests every ``WorkspaceStore`` must pass; subclass and implement the two openers."""

    def make_store(self, tmp_path: Path) -> WorkspaceStore | Awaitable[WorkspaceStore]:
        """Return a fresh, empty store living under ``tmp_path`` (an empty directory)."""
        raise NotImplementedError

    def open_twin(self, store: WorkspaceStore) -> WorkspaceStore | Awaitable[WorkspaceStore]:
        """Return another handle, with its own connection, on ``store``'s storage."""
        raise NotImplementedError

    @pytest.fixture
    async def handles(self, tmp_path: Path) -> AsyncIterator[list[WorkspaceStore]]:
        """Every handle the test opened; all closed afterwards, twins first."""
        opened: list[WorkspaceStore] = []
        yield opened
        for handle in reversed(opened):
            close = getattr(handle, "close", None)
            result = close() if callable(close) else None
            if inspect.isawaitable(result):
                await result

    @pytest.fixture
    async def store(self, tmp_path: Path, handles: list[WorkspaceStore]) -> WorkspaceStore:
        """A fresh, empty store."""
        made = self.make_store(tmp_path)
        store = await made if inspect.isawaitable(made) else made
        handles.append(store)
        return store

    @pytest.fixture
    async def twin(self, store: WorkspaceStore, handles: list[WorkspaceStore]) -> WorkspaceStore:
        """A second handle on ``store``'s storage."""
        made = self.open_twin(store)
        twin = await made if inspect.isawaitable(made) else made
        handles.append(twin)
        return twin

    # -- round trip ----------------------------------------------------------------------

    async def test_a_new_tenant_has_no_workspace(self, store: WorkspaceStore) -> None:
        assert await store.load(TENANT) is None
        assert await store.history(TENANT) == []
        assert await store.published(TENANT) is None
        assert await store.published_versions() == {}

    async def test_a_full_snapshot_round_trips_through_the_converter(
        self, store: WorkspaceStore, twin: WorkspaceStore
    ) -> None:
        first = _first()
        await store.save(first, expected_version=0, change=_change(first))
        second = _drafted(first)
        await store.save(second, expected_version=1, change=_change(second))
        for handle in (store, twin):
            loaded = await handle.load(TENANT)
            assert loaded == second
            assert loaded is not None
            assert dump_snapshot(loaded.snapshot) == dump_snapshot(second.snapshot)
            assert loaded.secret_rotations == {SECRET_REF: 1}

    # -- versioning ----------------------------------------------------------------------

    async def test_every_change_is_versioned_with_who_when_and_why(
        self, twin: WorkspaceStore, store: WorkspaceStore
    ) -> None:
        first = _first()
        await store.save(first, expected_version=0, change=_change(first, subject="sec"))
        second = _drafted(first)
        change = _change(second, subject="data", reason="ticket HR-12: add the HR source")
        await store.save(second, expected_version=1, change=change)
        history = await twin.history(TENANT)
        assert [(c.version, c.subject, c.reason) for c in history] == [
            (1, "sec", None),
            (2, "data", "ticket HR-12: add the HR source"),
        ]
        assert history[1] == change
        assert history[1].at == T0 + timedelta(minutes=2)
        assert await twin.workspace_at(TENANT, 1) == first
        assert await twin.workspace_at(TENANT, 2) == second
        assert await twin.workspace_at(TENANT, 3) is None

    async def test_a_save_must_be_the_next_version(self, store: WorkspaceStore) -> None:
        first = _first()
        with pytest.raises(ValueError, match="cannot edit"):
            await store.save(first, expected_version=1, change=_change(first))
        with pytest.raises(ValueError, match="describe"):
            await store.save(first, expected_version=0, change=_change(first.next()))
        assert await store.load(TENANT) is None

    # -- optimistic concurrency ----------------------------------------------------------

    async def test_a_stale_write_is_a_classified_conflict_and_changes_nothing(
        self, store: WorkspaceStore
    ) -> None:
        first = _first()
        await store.save(first, expected_version=0, change=_change(first))
        second = _drafted(first)
        await store.save(second, expected_version=1, change=_change(second))
        stale = first.next(secret_rotations={SECRET_REF: 2})  # also version 2, based on 1
        with pytest.raises(ConfigConflictError) as raised:
            await store.save(stale, expected_version=1, change=_change(stale, subject="bob"))
        assert raised.value.code is ErrorCode.ESRA_CONFIG_CONFLICT
        assert (raised.value.expected, raised.value.current) == (1, 2)
        assert await store.load(TENANT) == second
        assert [c.subject for c in await store.history(TENANT)] == ["alice", "alice"]

    async def test_creating_a_workspace_twice_is_a_conflict(self, store: WorkspaceStore) -> None:
        first = _first()
        await store.save(first, expected_version=0, change=_change(first))
        again = AdminWorkspace(tenant_id=TENANT).next()
        with pytest.raises(ConfigConflictError):
            await store.save(again, expected_version=0, change=_change(again))
        assert await store.load(TENANT) == first

    async def test_two_concurrent_writers_of_one_version_exactly_one_wins(
        self, store: WorkspaceStore, twin: WorkspaceStore
    ) -> None:
        first = _first()
        await store.save(first, expected_version=0, change=_change(first))
        ours = _drafted(first)
        theirs = first.next(secret_rotations={SECRET_REF: 2})
        outcomes = await asyncio.gather(
            store.save(ours, expected_version=1, change=_change(ours, subject="ours")),
            twin.save(theirs, expected_version=1, change=_change(theirs, subject="theirs")),
            return_exceptions=True,
        )
        conflicts = [o for o in outcomes if isinstance(o, ConfigConflictError)]
        assert len(conflicts) == 1, outcomes
        assert outcomes.count(None) == 1, outcomes
        winner = (ours, theirs)[outcomes.index(None)]
        assert await store.load(TENANT) == winner
        assert await twin.load(TENANT) == winner
        history = await store.history(TENANT)
        assert [c.version for c in history] == [1, 2]

    async def test_concurrent_first_saves_exactly_one_wins(
        self, store: WorkspaceStore, twin: WorkspaceStore
    ) -> None:
        one, two = _first(), AdminWorkspace(tenant_id=TENANT).next()
        outcomes = await asyncio.gather(
            store.save(one, expected_version=0, change=_change(one, subject="one")),
            twin.save(two, expected_version=0, change=_change(two, subject="two")),
            return_exceptions=True,
        )
        assert sorted(type(o).__name__ for o in outcomes) == ["ConfigConflictError", "NoneType"]
        assert len(await store.history(TENANT)) == 1

    # -- publications --------------------------------------------------------------------

    async def test_a_published_snapshot_is_kept_by_version_and_never_replaced(
        self, store: WorkspaceStore, twin: WorkspaceStore
    ) -> None:
        first = _first()
        await store.save(first, expected_version=0, change=_change(first))
        published = _drafted(first, published=True)
        await store.save(published, expected_version=1, change=_change(published))
        changed_source = attrs.evolve(published.snapshot.sources[0], description="Changed.")
        draft = published.next(snapshot=attrs.evolve(published.snapshot, sources=(changed_source,)))
        await store.save(draft, expected_version=2, change=_change(draft))
        # The draft moved on; the publication did not.
        assert await twin.published(TENANT) == published.snapshot
        assert await twin.published_versions() == {TENANT: 2}
        republished = draft.next(published=True)
        await store.save(republished, expected_version=3, change=_change(republished))
        assert await twin.published(TENANT) == republished.snapshot
        assert await twin.published_at(TENANT, 2) == published.snapshot
        assert await twin.published_at(TENANT, 4) == republished.snapshot
        assert await twin.published_at(TENANT, 3) is None
        assert await twin.published_versions() == {TENANT: 4}
        loaded = await twin.published_at(TENANT, 2)
        assert loaded is not None
        assert loaded.sources[0].description != "Changed."

    async def test_adoption_stores_the_running_snapshot_once(
        self, store: WorkspaceStore, twin: WorkspaceStore
    ) -> None:
        running = contract_snapshot(version="from-file")
        adopted = await adopt(store, running, subject="host-1", at=T0)
        again = await adopt(twin, contract_snapshot(version="other"), subject="host-2", at=T0)
        assert adopted == again
        assert adopted.version == 1
        assert adopted.published_version == 1
        assert await twin.published(TENANT) == running
        assert [c.subject for c in await twin.history(TENANT)] == ["host-1"]

    # -- tenants -------------------------------------------------------------------------

    async def test_tenants_are_isolated(self, store: WorkspaceStore) -> None:
        ours, theirs = _first(TENANT), _first(OTHER)
        await store.save(ours, expected_version=0, change=_change(ours))
        await store.save(theirs, expected_version=0, change=_change(theirs, subject="other"))
        ours_published = _drafted(ours, published=True)
        await store.save(ours_published, expected_version=1, change=_change(ours_published))
        # Tenant B is still at version 1: naming tenant A's version 2 is a conflict.
        skipped = theirs.next().next()
        with pytest.raises(ConfigConflictError):
            await store.save(skipped, expected_version=2, change=_change(skipped))
        other_loaded = await store.load(OTHER)
        assert other_loaded == theirs
        assert await store.published(OTHER) is None
        assert await store.published_at(OTHER, 2) is None
        assert [c.subject for c in await store.history(OTHER)] == ["other"]
        assert await store.published_versions() == {TENANT: 2}
        snapshot = await store.published(TENANT)
        assert snapshot is not None
        assert snapshot.tenant_id == TENANT

    # -- the audit outbox ----------------------------------------------------------------

    async def test_a_saved_changes_audit_record_is_held_until_settled(
        self, twin: WorkspaceStore, store: WorkspaceStore
    ) -> None:
        first = _first()
        await store.save(first, expected_version=0, change=_change(first), audit=_record(1))
        second = _drafted(first, published=True)
        await store.save(second, expected_version=1, change=_change(second), audit=_record(2))
        third = _drafted(second)
        await store.save(third, expected_version=2, change=_change(third))  # none to hold
        # Held durably, in the order saved, readable from another connection.
        assert await twin.pending_audit() == [_record(1), _record(2)]
        await twin.settle_audit(_record(1).correlation_id)
        await twin.settle_audit("admin:never-held")
        assert await store.pending_audit() == [_record(2)]

    async def test_a_refused_save_holds_no_audit_record(self, store: WorkspaceStore) -> None:
        first = _first()
        await store.save(first, expected_version=0, change=_change(first))
        stale = AdminWorkspace(tenant_id=TENANT).next()
        with pytest.raises(ConfigConflictError):
            await store.save(stale, expected_version=0, change=_change(stale), audit=_record(1))
        assert await store.pending_audit() == []

    async def test_a_claim_hands_out_the_oldest_record_deleted_once_its_block_completes(
        self, store: WorkspaceStore
    ) -> None:
        async with store.claim_audit() as nothing:
            assert nothing is None  # nothing held
        first, second = await hold_audit_records(store, 2)

        async def refused() -> None:
            async with store.claim_audit() as record:
                assert record == first
                raise ConnectionError  # the sink refused it: it stays held

        with pytest.raises(ConnectionError):
            await refused()
        assert await store.pending_audit() == [first, second]
        async with store.claim_audit() as record:
            assert record == first
        assert await store.pending_audit() == [second]

    async def test_while_a_claim_is_held_no_other_handle_gets_one(
        self, store: WorkspaceStore, twin: WorkspaceStore
    ) -> None:
        first, second = await hold_audit_records(store, 2)
        async with store.claim_audit() as record:
            assert record == first
            async with twin.claim_audit() as other:
                assert other is None  # its holder is forwarding
            async with store.claim_audit() as again:
                assert again is None
        async with twin.claim_audit() as record:
            assert record == second
        assert await store.pending_audit() == []

    async def test_two_handles_forwarding_at_once_deliver_each_record_once_in_order(
        self, store: WorkspaceStore, twin: WorkspaceStore
    ) -> None:
        """Two hosts on one database both forward after their changes and on their timers:
        a record one of them is delivering is never handed to the sink by the other."""
        held = await hold_audit_records(store, 6)
        taken: list[str] = []

        async def drain(handle: WorkspaceStore) -> None:
            sink = _SlowSink(taken)
            async with asyncio.timeout(30):
                while await handle.pending_audit():
                    await forward_audit_outbox(handle, sink)
                    await asyncio.sleep(0.005)

        await asyncio.gather(drain(store), drain(twin))
        assert taken == [record.correlation_id for record in held]
        assert await twin.pending_audit() == []
