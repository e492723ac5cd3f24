"""documentRef on results: off by default, and when on, openable only by the caller it names."""

from __future__ import annotations

import attrs
import pytest

from esra.core._fetch.tokens import open as open_ref
from esra.core._pipeline.respond import respond
from esra.core._response import RetrievalResponse
from esra.core._retriever import Retriever
from esra.core.exceptions import DocumentNotFoundError
from esra.core.fetch import DocumentLocator, DocumentRefMinter, Keyring, TokenBinding
from esra.core.testing import (
    FakeClock,
    FakeLanguageModel,
    InMemoryAuditSink,
    InMemoryConfigRepository,
    InMemorySearchProvider,
)
from tests.core._ranking_fixtures import candidate, ranked, scope
from tests.core.factories import (
    EXPOSURE_ID,
    make_context,
    make_exposure,
    make_snapshot,
    make_source,
)
from tests.core.test_retriever import ROWS

RING = Keyring.generate("k1")


def _respond(*, fetch_enabled: bool, refs: DocumentRefMinter | None) -> RetrievalResponse:
    base = scope()
    fetch_scope = attrs.evolve(
        base, exposure=attrs.evolve(base.exposure, fetch_enabled=fetch_enabled)
    )
    items = [ranked(candidate("s-a", f"key-{n}", 1.0), f"r_{n}", 1 / (n + 2)) for n in range(3)]
    return respond(
        items, scope=fetch_scope, warnings=(), correlation_id="c", source_names={}, refs=refs
    )


def _minter(subject: str = "alice", clock: FakeClock | None = None) -> DocumentRefMinter:
    return DocumentRefMinter(RING, clock or FakeClock(), make_context(subject=subject), 60.0)


def test_no_refs_when_fetch_is_disabled_even_with_a_minter() -> None:
    response = _respond(fetch_enabled=False, refs=_minter())
    assert [r.document_ref for r in response.results] == [None, None, None]


def test_no_refs_without_a_minter_even_when_fetch_is_enabled() -> None:
    response = _respond(fetch_enabled=True, refs=None)
    assert [r.document_ref for r in response.results] == [None, None, None]


def test_each_ref_opens_to_its_record_for_the_caller_only() -> None:
    clock = FakeClock()
    minter = _minter(clock=clock)
    response = _respond(fetch_enabled=True, refs=minter)
    binding = minter.binding("exp-r")
    opened = [
        open_ref(r.document_ref or "", binding=binding, keyring=RING, clock=clock)
        for r in response.results
    ]
    assert [(o.source_id, o.record_key) for o in opened] == [
        ("s-a", "key-0"),
        ("s-a", "key-1"),
        ("s-a", "key-2"),
    ]
    assert all(o.mapping_id for o in opened)
    assert all("key-" not in (r.document_ref or "") for r in response.results)
    bob = TokenBinding(binding.tenant_id, binding.exposure_id, "bob")
    for result in response.results:
        with pytest.raises(DocumentNotFoundError):
            open_ref(result.document_ref or "", binding=bob, keyring=RING, clock=clock)
    clock.advance(60)
    with pytest.raises(DocumentNotFoundError):
        open_ref(response.results[0].document_ref or "", binding=binding, keyring=RING, clock=clock)


def _retriever(*, fetch_enabled: bool, keyring: Keyring | None, clock: FakeClock) -> Retriever:
    sources = [make_source("s-1"), make_source("s-2")]
    snapshot = make_snapshot(
        sources,
        exposure=make_exposure(capability_id="cap-1", fetch_enabled=fetch_enabled),
    )
    return Retriever(
        config=InMemoryConfigRepository([snapshot]),
        providers={"s-1": InMemorySearchProvider(ROWS), "s-2": InMemorySearchProvider(ROWS)},
        model=FakeLanguageModel(),
        audit=InMemoryAuditSink(),
        clock=clock,
        keyring=keyring,
        document_ref_ttl_s=120.0,
    )


@pytest.mark.parametrize(("fetch_enabled", "keyring"), [(False, RING), (True, None), (False, None)])
async def test_the_retriever_attaches_no_refs_by_default(
    fetch_enabled: bool, keyring: Keyring | None
) -> None:
    retriever = _retriever(fetch_enabled=fetch_enabled, keyring=keyring, clock=FakeClock())
    response = await retriever.retrieve(make_context(), "leave policy")
    assert response.results
    assert all(r.document_ref is None for r in response.results)


async def test_the_retriever_attaches_refs_bound_to_the_caller() -> None:
    clock = FakeClock()
    retriever = _retriever(fetch_enabled=True, keyring=RING, clock=clock)
    ctx = make_context(subject="alice")
    response = await retriever.retrieve(ctx, "leave policy")
    assert response.results
    binding = TokenBinding.for_caller(ctx, EXPOSURE_ID)
    opened: dict[str, DocumentLocator] = {}
    for result in response.results:
        assert result.document_ref is not None
        opened[result.title] = open_ref(
            result.document_ref, binding=binding, keyring=RING, clock=clock
        )
        other = TokenBinding.for_caller(make_context(subject="mallory"), EXPOSURE_ID)
        with pytest.raises(DocumentNotFoundError):
            open_ref(result.document_ref, binding=other, keyring=RING, clock=clock)
        foreign = TokenBinding.for_caller(make_context(tenant_id="tenant-b"), EXPOSURE_ID)
        with pytest.raises(DocumentNotFoundError):
            open_ref(result.document_ref, binding=foreign, keyring=RING, clock=clock)
    assert opened["Annual leave policy"] == DocumentLocator("s-1", "m-s-1", "1")
    assert opened["Leave request form"] == DocumentLocator("s-2", "m-s-2", "10")
    clock.advance(120)
    with pytest.raises(DocumentNotFoundError):
        open_ref(response.results[0].document_ref or "", binding=binding, keyring=RING, clock=clock)


def test_a_non_positive_ref_lifetime_is_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        Retriever(
            config=InMemoryConfigRepository([]),
            providers={},
            model=FakeLanguageModel(),
            audit=InMemoryAuditSink(),
            document_ref_ttl_s=0,
        )
