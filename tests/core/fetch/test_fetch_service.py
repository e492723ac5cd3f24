"""esra_{slug}_fetch: every fetch re-runs the whole chain; a reference only identifies.

Each test surfaces a record through a real ``Retriever`` search, keeps its ``document_ref``,
changes one link of the chain, and fetches again.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping as MappingABC
from collections.abc import Sequence
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from esra.core._context import ClaimValue, InvocationContext
from esra.core._fetch.service import DocumentFetcher
from esra.core._pipeline.values import ValidatedQuery
from esra.core._query import ResultRow
from esra.core._retriever import Retriever
from esra.core.codes import AuditEvent, ErrorCode, ProviderErrorCode
from esra.core.config import (
    AccessPolicy,
    BindingMode,
    ConfigSnapshot,
    MaskingKind,
    MaskingRule,
    Operator,
    RecordFilter,
    SourceBinding,
)
from esra.core.exceptions import (
    DocumentNotFoundError,
    ExposureNotFoundError,
    FetchQuotaExceededError,
    InvalidRequestError,
    QuotaUnavailableError,
    SourceUnavailableError,
)
from esra.core.fetch import Keyring
from esra.core.testing import (
    FakeClock,
    FakeLanguageModel,
    InMemoryAuditSink,
    InMemoryConfigRepository,
    InMemoryQuotaStore,
    InMemorySearchProvider,
)
from tests.core.factories import (
    CLIENT_APP,
    TENANT,
    make_capability,
    make_context,
    make_exposure,
    make_field,
    make_mapping,
    make_snapshot,
    make_source,
)

BODY = "Employees get twenty-eight days of annual leave. " * 20
ROWS: dict[str, list[dict[str, Any]]] = {
    "m-s-1": [
        {
            "col_id": 7,
            "col_title": "Annual leave policy",
            "col_body": BODY,
            "col_email": "ana@example.org",
            "col_region": "north",
            "col_salary": "120000",
        },
        {
            "col_id": 8,
            "col_title": "Parental leave",
            "col_body": "Parental leave is sixteen weeks.",
            "col_email": "bo@example.org",
            "col_region": "south",
            "col_salary": "90000",
        },
    ]
}


def _mapping(**overrides: Any) -> Any:
    fields = overrides.pop("fields", None) or (
        make_field("title"),
        make_field("body"),
        make_field("email", searchable=False),
        make_field("region", searchable=False, restricted=True, operators=[Operator.EQ]),
        make_field("salary", searchable=False, restricted=True),
    )
    return make_mapping("m-s-1", source_id="s-1", fields=fields, **overrides)


def _snapshot(
    *, mapping: Any = None, fetch_enabled: bool = True, **exposure: Any
) -> ConfigSnapshot:
    sources = [make_source("s-1"), make_source("s-2")]
    capability = make_capability(
        [SourceBinding("s-1", BindingMode.MANDATORY), SourceBinding("s-2", BindingMode.MANDATORY)]
    )
    return make_snapshot(
        sources,
        capability=capability,
        mappings=[mapping or _mapping(), make_mapping("m-s-2", source_id="s-2")],
        exposure=make_exposure(
            **{"fetch_enabled": fetch_enabled, "size_cap_chars": 5_000, **exposure}
        ),
    )


class _World:
    """One tenant's runtime: a search path and a fetch path over the same ports."""

    def __init__(self, *, hourly_chars: int = 100_000, rows: Any = None) -> None:
        self.ref = ""
        self.clock = FakeClock()
        self.config = InMemoryConfigRepository([_snapshot()])
        self.provider = InMemorySearchProvider(rows or ROWS)
        self.audit = InMemoryAuditSink()
        self.keyring = Keyring.generate("k1")
        providers = {"s-1": self.provider, "s-2": InMemorySearchProvider({})}
        self.retriever = Retriever(
            config=self.config,
            providers=providers,
            model=FakeLanguageModel(),
            audit=self.audit,
            clock=self.clock,
            keyring=self.keyring,
            tenant_id=TENANT,
        )
        self.fetcher = DocumentFetcher(
            config=self.config,
            providers=providers,
            audit=self.audit,
            keyring=self.keyring,
            quota=InMemoryQuotaStore(self.clock),
            hourly_chars=hourly_chars,
            clock=self.clock,
            executor=self.retriever.executor,
            tenant_id=TENANT,
        )

    def republish(self, snapshot: ConfigSnapshot) -> None:
        self.config.put(snapshot)

    async def ref_for(self, title: str, ctx: InvocationContext) -> str:
        response = await self.retriever.retrieve(ctx, "annual parental leave")
        ref = next(r.document_ref for r in response.results if r.title == title)
        assert ref is not None
        return ref

    def fetches(self) -> list[Any]:
        return self.audit.events(AuditEvent.FETCH)


def _caller(subject: str = "alice", claims: MappingABC[str, ClaimValue] | None = None) -> Any:
    return make_context(subject=subject, claims=claims)


async def test_a_fetch_returns_the_whole_record_allowlisted_and_masked() -> None:
    world = _World()
    ref = await world.ref_for("Annual leave policy", _caller())

    document = await world.fetcher.fetch(_caller(), ref)

    assert document.title == "Annual leave policy"
    assert document.text == BODY
    assert (document.total_chars, document.has_more, document.next_offset) == (
        len(document.text),
        False,
        None,
    )
    # Restricted fields never leave, even though the row holds them.
    assert set(document.fields) == {"email"}
    assert document.fields["email"] == "ana@example.org"
    [record] = world.fetches()
    assert record.outcome == "ok"
    assert record.dimensions["chars"] == len(document.text)
    assert record.dimensions["source_id"] == "s-1"
    assert "7" not in {str(v) for v in record.dimensions.values()}


async def test_pages_continue_where_the_last_stopped_and_join_to_the_whole_text() -> None:
    world = _World()
    ref = await world.ref_for("Annual leave policy", _caller())
    whole = (await world.fetcher.fetch(_caller(), ref)).text

    pages = []
    offset: int | None = 0
    while offset is not None:
        page = await world.fetcher.fetch(_caller(), ref, offset=offset, max_chars=300)
        assert len(page.text) <= 300
        assert page.total_chars == len(whole)
        pages.append(page.text)
        offset = page.next_offset

    assert "".join(pages) == whole
    assert len(pages) == -(-len(whole) // 300)


async def test_the_exposure_size_cap_bounds_a_page() -> None:
    world = _World()
    world.republish(_snapshot(size_cap_chars=100))
    ref = await world.ref_for("Annual leave policy", _caller())

    page = await world.fetcher.fetch(_caller(), ref, max_chars=10_000)

    # The title (19 characters) and the email field (5 + 15) take 39 of the cap's 100.
    assert len(page.text) == 100 - 39
    assert page.has_more


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda: _snapshot(fetch_enabled=False), id="fetch-turned-off"),
        pytest.param(lambda: _snapshot(published=False), id="exposure-unpublished"),
        pytest.param(lambda: _snapshot(audience=("another-app",)), id="audience-narrowed"),
        pytest.param(
            lambda: attrs.evolve(
                _snapshot(),
                access_policies=(
                    AccessPolicy.matching(
                        make_exposure(), required_claims=frozenset({"clearance"})
                    ),
                ),
            ),
            id="policy-now-requires-a-claim",
        ),
    ],
)
async def test_a_tool_the_caller_may_no_longer_use_does_not_exist(change: Any) -> None:
    world = _World()
    ref = await world.ref_for("Annual leave policy", _caller())
    world.republish(change())

    with pytest.raises(ExposureNotFoundError):
        await world.fetcher.fetch(_caller(), ref)

    [record] = world.fetches()
    assert (record.outcome, record.reason) == ("denied", ErrorCode.ESRA_EXPOSURE_NOT_FOUND.value)


async def test_fetch_is_off_by_default() -> None:
    world = _World()
    world.republish(attrs.evolve(_snapshot(), exposures=(make_exposure(size_cap_chars=5_000),)))
    response = await world.retriever.retrieve(_caller(), "annual leave")
    assert response.results
    assert all(r.document_ref is None for r in response.results)


async def test_a_reference_replayed_by_another_caller_is_not_found() -> None:
    world = _World()
    ref = await world.ref_for("Annual leave policy", _caller("alice"))

    with pytest.raises(DocumentNotFoundError) as replay:
        await world.fetcher.fetch(_caller("mallory"), ref)

    assert replay.value.code is ErrorCode.ESRA_DOCUMENT_NOT_FOUND
    [record] = world.fetches()
    assert record.outcome == "denied"
    assert "source_id" not in record.dimensions


async def test_a_reference_replayed_through_another_client_application_is_not_found() -> None:
    # Both applications are in the exposure's audience, so the chain admits either; the
    # reference surfaced to one is still not the other's to spend.
    world = _World()
    world.republish(_snapshot(audience=(CLIENT_APP, "desktop-app")))
    ref = await world.ref_for("Annual leave policy", _caller())

    with pytest.raises(DocumentNotFoundError) as replay:
        await world.fetcher.fetch(make_context(client_app_id="desktop-app", subject="alice"), ref)

    assert replay.value.code is ErrorCode.ESRA_DOCUMENT_NOT_FOUND
    assert (await world.fetcher.fetch(_caller(), ref)).title == "Annual leave policy"
    denied, allowed = world.fetches()
    assert (denied.outcome, allowed.outcome) == ("denied", "ok")


async def test_a_source_no_longer_in_scope_is_not_found_and_never_named() -> None:
    world = _World()
    ref = await world.ref_for("Annual leave policy", _caller())
    world.republish(_snapshot(source_subset=frozenset({"s-2"})))

    with pytest.raises(DocumentNotFoundError):
        await world.fetcher.fetch(_caller(), ref)

    [record] = world.fetches()
    assert "s-1" not in repr(record)


async def test_the_platform_narrowing_the_callers_sources_hides_the_record() -> None:
    world = _World()
    ref = await world.ref_for("Annual leave policy", _caller())
    narrowed = make_context(subject="alice", authorized_source_ids=["s-2"])

    with pytest.raises(DocumentNotFoundError):
        await world.fetcher.fetch(narrowed, ref)


async def test_the_record_filter_is_re_evaluated_with_the_callers_current_claims() -> None:
    world = _World()
    guarded = _mapping(record_filters=(RecordFilter(field="region", claim="region"),))
    world.republish(_snapshot(mapping=guarded))
    ref = await world.ref_for("Annual leave policy", _caller(claims={"region": "north"}))

    assert (await world.fetcher.fetch(_caller(claims={"region": "north"}), ref)).text
    with pytest.raises(DocumentNotFoundError):
        await world.fetcher.fetch(_caller(claims={"region": "south"}), ref)
    with pytest.raises(DocumentNotFoundError):
        await world.fetcher.fetch(_caller(claims={}), ref)
    # The record filter ran inside the lookup itself, bound to the current claim.
    lookups = [q for q in world.provider.executed if q.lookup_key is not None]
    assert [q.record_filters[0].values for q in lookups] == [("north",), ("south",)]


async def test_masking_configured_after_the_search_applies_to_the_fetch() -> None:
    world = _World()
    ref = await world.ref_for("Annual leave policy", _caller())
    masked = _mapping(masking=(MaskingRule(field="email", kind=MaskingKind.EMAIL),))
    world.republish(_snapshot(mapping=masked))

    document = await world.fetcher.fetch(_caller(), ref)

    assert "ana@example.org" not in repr(document)
    assert document.fields["email"].endswith("@example.org")


async def test_a_field_made_unreturnable_after_the_search_is_not_fetched() -> None:
    world = _World()
    ref = await world.ref_for("Annual leave policy", _caller())
    fields = tuple(
        attrs.evolve(f, is_returnable=False) if f.name == "email" else f for f in _mapping().fields
    )
    world.republish(_snapshot(mapping=_mapping(fields=fields)))

    document = await world.fetcher.fetch(_caller(), ref)

    assert "email" not in document.fields


class _Overreaching(InMemorySearchProvider):
    """A provider that returns more than it was asked for."""

    async def execute(self, query: ValidatedQuery, *, timeout_s: float) -> Sequence[ResultRow]:
        rows = await super().execute(query, timeout_s=timeout_s)
        return [attrs.evolve(r, values={**r.values, "salary": "120000"}) for r in rows]


async def test_the_allowlist_drops_fields_a_provider_should_not_have_returned() -> None:
    world = _World()
    ref = await world.ref_for("Annual leave policy", _caller())
    overreaching = _Overreaching(ROWS)
    world.fetcher = DocumentFetcher(
        config=world.config,
        providers={"s-1": overreaching},
        audit=world.audit,
        keyring=world.keyring,
        quota=InMemoryQuotaStore(world.clock),
        clock=world.clock,
    )

    document = await world.fetcher.fetch(_caller(), ref)

    assert "salary" not in document.fields
    assert "120000" not in repr(document)


async def test_the_hourly_quota_is_per_caller_and_resets_each_hour() -> None:
    world = _World(hourly_chars=500)
    ref = await world.ref_for("Annual leave policy", _caller())
    bob_ref = await world.ref_for("Annual leave policy", _caller("bob"))

    await world.fetcher.fetch(_caller(), ref, max_chars=400)
    with pytest.raises(FetchQuotaExceededError) as exceeded:
        await world.fetcher.fetch(_caller(), ref, offset=400, max_chars=400)
    # What is left still serves a smaller page, and another caller has a budget of its own.
    # (Each page also costs its title and fields: 39 characters of this record's.)
    assert (await world.fetcher.fetch(_caller(), ref, offset=400, max_chars=20)).text
    assert (await world.fetcher.fetch(_caller("bob"), bob_ref, max_chars=400)).text
    world.clock.advance(3600)
    ref = await world.ref_for("Annual leave policy", _caller())  # the old one expired
    assert (await world.fetcher.fetch(_caller(), ref, offset=400, max_chars=400)).text

    assert exceeded.value.code is ErrorCode.ESRA_FETCH_QUOTA_EXCEEDED
    outcomes = [(r.outcome, r.reason) for r in world.fetches()]
    assert ("denied", ErrorCode.ESRA_FETCH_QUOTA_EXCEEDED.value) in outcomes


async def test_a_failing_source_is_unavailable_not_missing() -> None:
    world = _World()
    ref = await world.ref_for("Annual leave policy", _caller())
    world.provider.fail_with = ProviderErrorCode.PERMISSION_DENIED

    with pytest.raises(SourceUnavailableError):
        await world.fetcher.fetch(_caller(), ref)

    [record] = world.fetches()
    assert (record.outcome, record.reason) == ("failed", ErrorCode.ESRA_SOURCE_UNAVAILABLE.value)


async def test_a_record_deleted_since_the_search_is_not_found() -> None:
    world = _World()
    ref = await world.ref_for("Parental leave", _caller())
    world.provider._rows["m-s-1"] = [r for r in ROWS["m-s-1"] if r["col_id"] != 8]

    with pytest.raises(DocumentNotFoundError):
        await world.fetcher.fetch(_caller(), ref)


@pytest.mark.parametrize(("offset", "max_chars"), [(-1, 10), (0, 0), (0, -5)])
async def test_a_nonsense_page_is_an_invalid_request_and_audited(
    offset: int, max_chars: int
) -> None:
    world = _World()
    ref = await world.ref_for("Annual leave policy", _caller())
    with pytest.raises(InvalidRequestError):
        await world.fetcher.fetch(_caller(), ref, offset=offset, max_chars=max_chars)
    # Every fetch, served or refused, is one record (docs/document-fetch.md).
    outcomes = [(r.outcome, r.reason) for r in world.fetches()]
    assert outcomes == [("rejected", ErrorCode.ESRA_INVALID_REQUEST.value)]


def _vouched(issuer: str, subject: str = "alice") -> Any:
    """The caller ``subject`` as the identity provider ``issuer`` vouched for it."""
    ctx = _caller(subject)
    return attrs.evolve(ctx, caller=attrs.evolve(ctx.caller, issuer=issuer))


async def test_the_same_subject_from_another_issuer_is_another_caller() -> None:
    world = _World(hourly_chars=500)
    staff, partner = _vouched("https://staff.example/"), _vouched("https://partner.example/")
    ref = await world.ref_for("Annual leave policy", staff)
    partner_ref = await world.ref_for("Annual leave policy", partner)

    # The partner issuer's "alice" can neither open staff alice's reference...
    with pytest.raises(DocumentNotFoundError):
        await world.fetcher.fetch(partner, ref)
    # ...nor spend her budget: each has 500 characters of its own this hour.
    assert (await world.fetcher.fetch(partner, partner_ref, max_chars=450)).text
    assert (await world.fetcher.fetch(staff, ref, max_chars=450)).text
    with pytest.raises(FetchQuotaExceededError):
        await world.fetcher.fetch(staff, ref, offset=450, max_chars=100)


async def test_another_tenants_caller_is_refused_before_its_configuration_is_read() -> None:
    world = _World()
    ref = await world.ref_for("Annual leave policy", _caller())
    with pytest.raises(ExposureNotFoundError):
        await world.fetcher.fetch(make_context(tenant_id="tenant-b", subject="alice"), ref)


async def test_an_offset_past_the_end_returns_an_empty_last_page() -> None:
    world = _World()
    ref = await world.ref_for("Parental leave", _caller())
    page = await world.fetcher.fetch(_caller(), ref, offset=10_000)
    assert (page.text, page.has_more, page.total_chars) == (
        "",
        False,
        len(ROWS["m-s-1"][1]["col_body"]),
    )


async def test_parts_of_a_multi_part_record_are_concatenated_in_their_order() -> None:
    """Parts are consecutive slices of one text: nothing is added between them, and a part
    that is only whitespace keeps its place."""
    bodies = {1: "Part 1 on leave.\n", 2: "\n", 3: "Part 3 on leave."}
    parts = [
        {"col_id": "doc-1", "col_title": "Handbook", "col_body": bodies[n], "col_n": n}
        for n in (3, 1, 2)
    ]
    world = _World(rows={"m-s-1": parts})
    world.republish(
        _snapshot(mapping=make_mapping("m-s-1", source_id="s-1", part_order_column="col_n"))
    )
    ref = await world.ref_for("Handbook", _caller())

    document = await world.fetcher.fetch(_caller(), ref)

    assert document.text == "Part 1 on leave.\n\nPart 3 on leave."
    assert (document.total_chars, document.has_more) == (len(document.text), False)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
async def test_every_mutated_reference_is_simply_not_found(data: st.DataObject) -> None:
    """Through the whole service, not only the token layer: tampering is never anything else."""
    world = await _mutation_world()
    ref = world.ref
    position = data.draw(st.integers(0, len(ref) - 1), label="position")
    mutation = data.draw(st.sampled_from(["flip", "drop", "insert", "truncate"]), label="kind")
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    char = data.draw(st.sampled_from(alphabet), label="char")
    if mutation == "flip":
        assume(ref[position] != char)
        mutated = ref[:position] + char + ref[position + 1 :]
    elif mutation == "drop":
        mutated = ref[:position] + ref[position + 1 :]
    elif mutation == "insert":
        mutated = ref[:position] + char + ref[position:]
    else:
        mutated = ref[:position]
    # A change in the base64 padding bits can decode to the very same bytes.
    assume(_decoded(mutated) != _decoded(ref))

    with pytest.raises(DocumentNotFoundError):
        await world.fetcher.fetch(_caller(), mutated)


def _decoded(token: str) -> bytes | None:
    try:
        return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except ValueError:
        return None


_MUTATION_WORLD: list[_World] = []


async def _mutation_world() -> _World:
    """One world (and one reference) for every example: minting is not what is under test."""
    if not _MUTATION_WORLD:
        world = _World(hourly_chars=10**9)
        world.ref = await world.ref_for("Annual leave policy", _caller())
        _MUTATION_WORLD.append(world)
    return _MUTATION_WORLD[0]


class _UnreachableQuota:
    """A quota store that cannot answer, as a shared store does when its server is down."""

    async def consume(self, tenant_id: str, caller: str, amount: int, limit: int) -> bool:
        raise QuotaUnavailableError


async def test_an_unreachable_quota_store_refuses_the_fetch_and_says_so() -> None:
    """Governance fails closed: no budget answer, no document — and a failed record."""
    world = _World()
    ref = await world.ref_for("Annual leave policy", _caller())
    world.fetcher = DocumentFetcher(
        config=world.config,
        providers={"s-1": world.provider},
        audit=world.audit,
        keyring=world.keyring,
        quota=_UnreachableQuota(),
        clock=world.clock,
    )

    with pytest.raises(QuotaUnavailableError) as refused:
        await world.fetcher.fetch(_caller(), ref)

    assert refused.value.code is ErrorCode.ESRA_QUOTA_UNAVAILABLE
    (record,) = world.fetches()
    assert (record.outcome, record.reason) == ("failed", ErrorCode.ESRA_QUOTA_UNAVAILABLE.value)
