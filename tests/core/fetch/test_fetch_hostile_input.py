"""Hostile input to ``esra_{slug}_fetch`` through the core's ``DocumentFetcher``.

What the existing fetch tests do not already cover: arguments of the wrong type reaching the
core directly (an embedder is not behind the host's JSON-schema parser), a budget that is
not a number, every way the chain can change under a live reference, the not-found error
being one and the same whatever the reason, and concurrent fetches racing one budget.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import attrs
import pytest

from esra.core._fetch.result import FetchedDocument
from esra.core._fetch.service import DocumentFetcher
from esra.core._retriever import Retriever
from esra.core.codes import ErrorCode
from esra.core.config import (
    BindingMode,
    LifecycleState,
    SourceBinding,
    SourcePolicy,
)
from esra.core.exceptions import (
    DocumentNotFoundError,
    EsraError,
    FetchQuotaExceededError,
    InvalidRequestError,
)
from esra.core.fetch import Keyring
from esra.core.testing import (
    FakeLanguageModel,
    InMemoryCache,
    InMemoryQuotaStore,
    InMemorySearchProvider,
)
from tests.core.factories import TENANT, make_capability, make_exposure, make_mapping
from tests.core.fetch.test_fetch_service import BODY, ROWS, _caller, _snapshot, _World

# --- offset / max_chars of the wrong type ------------------------------------------------

_BAD_PAGES = [
    pytest.param(1.5, 10, id="float-offset"),
    pytest.param(0, 2.5, id="float-max-chars"),
    pytest.param(True, 10, id="bool-offset"),
    pytest.param(0, True, id="bool-max-chars"),
    pytest.param(math.nan, 10, id="nan-offset"),
    pytest.param(0, math.nan, id="nan-max-chars"),
    pytest.param(0, math.inf, id="inf-max-chars"),
    pytest.param(0.0, 10, id="integral-float-offset"),
    pytest.param("3", 10, id="str-offset"),
    pytest.param(0, "9", id="str-max-chars"),
    pytest.param(None, 10, id="none-offset"),
    pytest.param([0], 10, id="list-offset"),
]


@pytest.mark.parametrize(("offset", "max_chars"), _BAD_PAGES)
async def test_a_page_argument_that_is_not_an_integer_is_an_invalid_request(
    offset: Any, max_chars: Any
) -> None:
    """Classified, not ``ESRA_INTERNAL`` and not silently served: a float slice used to crash
    the fetch into an unclassified error, a bool or NaN was served as if it were a number
    (NaN ``max_chars`` gave an empty page whose ``next_offset`` pointed at itself)."""
    world = _World()
    ref = await world.ref_for("Annual leave policy", _caller())

    with pytest.raises(InvalidRequestError) as refused:
        await world.fetcher.fetch(_caller(), ref, offset=offset, max_chars=max_chars)

    assert refused.value.code is ErrorCode.ESRA_INVALID_REQUEST
    # Nothing lost: one rejected record, and none of the budget spent.
    (record,) = world.fetches()
    assert (record.outcome, record.reason) == ("rejected", ErrorCode.ESRA_INVALID_REQUEST.value)
    offset_dimension = record.dimensions["offset"]
    assert offset_dimension is None or (
        type(offset_dimension) is int and offset_dimension == offset
    )
    assert (await world.fetcher.fetch(_caller(), ref)).text


async def test_a_huge_offset_or_max_chars_is_an_empty_last_page_or_capped() -> None:
    world = _World()
    ref = await world.ref_for("Annual leave policy", _caller())

    past = await world.fetcher.fetch(_caller(), ref, offset=10**30, max_chars=10**30)
    whole = await world.fetcher.fetch(_caller(), ref, max_chars=10**30)

    assert (past.text, past.has_more, past.next_offset) == ("", False, None)
    assert past.offset == past.total_chars == len(whole.text)
    assert len(whole.text) <= 5_000  # the exposure's size cap


# --- the budget itself ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "hourly_chars",
    [math.nan, math.inf, 0.5, 1000.0, True, "1000", 0, -1],
    ids=["nan", "inf", "fraction", "float", "bool", "str", "zero", "negative"],
)
def test_an_hourly_budget_that_is_not_a_positive_integer_is_refused(hourly_chars: Any) -> None:
    """Governance fails closed: NaN or infinity compared below every ``used + amount``, so
    such a budget granted every fetch — an unmetered download API."""
    world = _World()
    with pytest.raises(ValueError, match="hourly_chars"):
        DocumentFetcher(
            config=world.config,
            providers={},
            audit=world.audit,
            keyring=world.keyring,
            quota=InMemoryQuotaStore(world.clock),
            hourly_chars=hourly_chars,
        )


def _carried(page: FetchedDocument) -> int:
    """What a served page costs: its text, title and fields (field names included)."""
    return len(page.text) + len(page.title) + sum(len(k) + len(v) for k, v in page.fields.items())


# The record's title and fields ("Annual leave policy", email "ana@example.org") travel with
# every page: a page of ``n`` characters of text costs ``n + _FIXED``.
_FIXED = len("Annual leave policy") + len("email") + len("ana@example.org")


async def test_concurrent_fetches_never_spend_more_than_the_budget_together() -> None:
    world = _World(hourly_chars=1_000)
    ref = await world.ref_for("Annual leave policy", _caller())

    outcomes = await asyncio.gather(
        *(world.fetcher.fetch(_caller(), ref, max_chars=300 - _FIXED) for _ in range(10)),
        return_exceptions=True,
    )

    served = [o for o in outcomes if not isinstance(o, BaseException)]
    refused = [o for o in outcomes if isinstance(o, BaseException)]
    assert sum(_carried(page) for page in served) <= 1_000
    assert len(served) == 3
    assert all(isinstance(o, FetchQuotaExceededError) for o in refused)
    assert len(world.fetches()) == 10


async def test_one_caller_exhausting_the_budget_leaves_another_callers_intact() -> None:
    world = _World(hourly_chars=300)
    mallory = await world.ref_for("Annual leave policy", _caller("mallory"))
    alice = await world.ref_for("Annual leave policy", _caller("alice"))
    await world.fetcher.fetch(_caller("mallory"), mallory, max_chars=300 - _FIXED)
    with pytest.raises(FetchQuotaExceededError):
        await world.fetcher.fetch(_caller("mallory"), mallory, offset=300, max_chars=1)
    # Mallory replaying alice's reference is not found — and costs alice nothing.
    with pytest.raises(DocumentNotFoundError):
        await world.fetcher.fetch(_caller("mallory"), alice)

    page = await world.fetcher.fetch(_caller("alice"), alice, max_chars=300 - _FIXED)
    assert _carried(page) == 300


# --- the chain changed under a live reference ----------------------------------------------


def _binding_removed() -> Any:
    snapshot = _snapshot()
    capability = make_capability([SourceBinding("s-2", BindingMode.MANDATORY)])
    return attrs.evolve(snapshot, capabilities=(capability,))


def _source_changed(**changes: Any) -> Any:
    snapshot = _snapshot()
    sources = tuple(attrs.evolve(s, **changes) if s.id == "s-1" else s for s in snapshot.sources)
    return attrs.evolve(snapshot, sources=sources)


def _mapping_gone() -> Any:
    snapshot = _snapshot()
    mappings = (make_mapping("m-s-1b", source_id="s-1"), make_mapping("m-s-2", source_id="s-2"))
    return attrs.evolve(snapshot, mappings=mappings)


def _exposure_recreated() -> Any:
    """Unpublished and published again as a new exposure under the same slug."""
    snapshot = _snapshot()
    exposure = make_exposure(exposure_id="exp-2", fetch_enabled=True, size_cap_chars=5_000)
    return attrs.evolve(snapshot, exposures=(exposure,))


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(_binding_removed, id="capability-binding-removed"),
        pytest.param(lambda: _source_changed(lifecycle=LifecycleState.RETIRED), id="retired"),
        pytest.param(lambda: _source_changed(lifecycle=LifecycleState.DEPRECATED), id="deprecated"),
        pytest.param(
            lambda: _source_changed(policy=SourcePolicy(frozenset({"another-app"}))),
            id="source-policy-excludes-client-app",
        ),
        pytest.param(_mapping_gone, id="mapping-removed"),
        pytest.param(_exposure_recreated, id="exposure-recreated-same-slug"),
    ],
)
async def test_a_reference_outliving_its_chain_is_not_found_and_names_nothing(
    change: Any,
) -> None:
    world = _World()
    ref = await world.ref_for("Annual leave policy", _caller())
    world.republish(change())

    with pytest.raises(DocumentNotFoundError):
        await world.fetcher.fetch(_caller(), ref)

    (record,) = world.fetches()
    assert (record.outcome, record.reason) == ("denied", ErrorCode.ESRA_DOCUMENT_NOT_FOUND.value)
    if change is not _mapping_gone:
        assert "source_id" not in record.dimensions


async def test_a_reference_from_another_deployment_or_a_retired_key_is_not_found() -> None:
    world = _World()
    ref = await world.ref_for("Annual leave policy", _caller())
    elsewhere = Keyring({"k1": Keyring.new_key()}, current="k1")
    rotated_then_retired = world.keyring.rotated("k2").retired("k1")

    for keyring in (elsewhere, rotated_then_retired):
        world.fetcher = DocumentFetcher(
            config=world.config,
            providers={"s-1": world.provider},
            audit=world.audit,
            keyring=keyring,
            quota=InMemoryQuotaStore(world.clock),
            clock=world.clock,
        )
        with pytest.raises(DocumentNotFoundError):
            await world.fetcher.fetch(_caller(), ref)


async def test_an_expired_reference_is_not_found_through_the_service() -> None:
    world = _World()
    ref = await world.ref_for("Annual leave policy", _caller())
    world.clock.advance(899)
    assert (await world.fetcher.fetch(_caller(), ref, max_chars=10)).text
    world.clock.advance(1)
    with pytest.raises(DocumentNotFoundError):
        await world.fetcher.fetch(_caller(), ref, max_chars=10)


async def test_not_found_reads_the_same_whatever_the_reason() -> None:
    """A caller sees the code and the message only; neither, nor any chained cause a host
    might render, may tell "garbage" from "exists but not yours" from "filtered out"."""
    world = _World()
    ref = await world.ref_for("Annual leave policy", _caller())
    deleted = await world.ref_for("Parental leave", _caller())
    world.provider._rows["m-s-1"] = [r for r in world.provider._rows["m-s-1"] if r["col_id"] != 8]

    attempts = [
        (_caller(), "garbage"),
        (_caller(), ref + "A"),
        (_caller("mallory"), ref),
        (_caller(), deleted),
    ]
    errors: list[EsraError] = []
    for ctx, token in attempts:
        with pytest.raises(DocumentNotFoundError) as refused:
            await world.fetcher.fetch(ctx, token)
        errors.append(refused.value)
    world.republish(_snapshot(source_subset=frozenset({"s-2"})))
    with pytest.raises(DocumentNotFoundError) as out_of_scope:
        await world.fetcher.fetch(_caller(), ref)
    errors.append(out_of_scope.value)

    assert {(e.code, str(e), e.args) for e in errors} == {
        (ErrorCode.ESRA_DOCUMENT_NOT_FOUND, "No such document.", ("No such document.",))
    }
    assert all(e.__cause__ is None for e in errors)


# --- references only for records a fetch can read --------------------------------------


@pytest.mark.parametrize("key_chars", [513, 70_000], ids=["over-lookup-limit", "over-token-field"])
async def test_a_record_key_no_fetch_can_read_gets_no_reference_and_fails_no_search(
    key_chars: int,
) -> None:
    """A key longer than a fetch may look up used to get a reference that could only ever be
    "not found"; one longer than a token field could hold made minting raise, so every search
    surfacing that record — any caller's — failed with ``ESRA_INTERNAL``."""
    rows = {"m-s-1": [dict(r) for r in ROWS["m-s-1"]]}
    rows["m-s-1"][1]["col_id"] = "k" * key_chars
    world = _World(rows=rows)

    response = await world.retriever.retrieve(_caller(), "annual parental leave")

    refs = {r.title: r.document_ref for r in response.results}
    assert refs["Parental leave"] is None
    annual = refs["Annual leave policy"]
    assert annual is not None
    assert (await world.fetcher.fetch(_caller(), annual)).text == BODY


async def test_a_cached_response_re_mints_no_reference_for_an_unreadable_key() -> None:
    """The result cache re-mints from the locators of the references the search gave: a
    warm hit must neither fail nor hand out a reference the search withheld."""
    rows = {"m-s-1": [dict(r) for r in ROWS["m-s-1"]]}
    rows["m-s-1"][1]["col_id"] = "k" * 70_000
    world = _World(rows=rows)
    snapshot = _snapshot()
    (capability,) = snapshot.capabilities
    cached = attrs.evolve(
        capability, limits=attrs.evolve(capability.limits, result_cache_ttl_s=60.0)
    )
    world.republish(attrs.evolve(snapshot, capabilities=(cached,)))
    world.retriever = Retriever(
        config=world.config,
        providers={"s-1": world.provider, "s-2": InMemorySearchProvider({})},
        model=FakeLanguageModel(),
        audit=world.audit,
        clock=world.clock,
        keyring=world.keyring,
        cache=InMemoryCache(),
        tenant_id=TENANT,
    )

    executed = []
    for _ in range(2):
        response = await world.retriever.retrieve(_caller(), "annual parental leave")
        refs = {r.title: r.document_ref for r in response.results}
        assert refs["Parental leave"] is None
        assert refs["Annual leave policy"] is not None
        executed.append(len(world.provider.executed))
    assert executed[0] == executed[1] > 0  # searched once, then served from the cache


# --- title and fields are charged with every page ------------------------------------------


async def test_an_exhausted_budget_serves_no_more_of_the_record() -> None:
    """Search counts title and field names and values against the size cap. Fetch charged
    the page's text alone, and an empty page (an offset past the end) cost nothing — so with
    the hour's budget spent, every fetch still returned the record's title and every
    returnable field whole, past the budget every time."""
    world = _World(hourly_chars=200)
    ref = await world.ref_for("Annual leave policy", _caller())
    first = await world.fetcher.fetch(_caller(), ref, max_chars=100)
    world.provider._rows["m-s-1"][0]["col_email"] = "x" * 150  # grown since the search

    served = _carried(first)
    for _ in range(3):
        try:
            page = await world.fetcher.fetch(_caller(), ref, offset=10**9, max_chars=1)
        except FetchQuotaExceededError:
            continue
        served += _carried(page)

    assert served <= 200
    assert [r.outcome for r in world.fetches()] == ["ok", "denied", "denied", "denied"]
