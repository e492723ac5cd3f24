"""A fetch response — title, fields and page text together — fits the exposure's size cap.

Search counts a result's title and fields against the size cap (``carried_chars``) and drops
a result whose title and fields alone do not fit. A fetch counts them the same way: the page
gets what the title and fields leave of the cap, and a record whose title and fields leave no
room for one character of its text is not served at all — "not found", as for every other
record this caller cannot be shown now, without charging the quota.
"""

from __future__ import annotations

from collections.abc import Mapping as MappingABC
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from esra.core._fetch.refs import DocumentRefMinter
from esra.core._fetch.result import FetchedDocument
from esra.core._fetch.service import DocumentFetcher
from esra.core._fetch.tokens import DocumentLocator
from esra.core._retriever import Retriever
from esra.core.codes import AuditEvent, ErrorCode
from esra.core.config import ConfigSnapshot
from esra.core.exceptions import DocumentNotFoundError
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
    EXPOSURE_ID,
    TENANT,
    make_context,
    make_exposure,
    make_field,
    make_mapping,
    make_snapshot,
    make_source,
)

TITLE = "Annual leave policy"
EMAIL = "ana@example.org"
BODY = "Employees get twenty-eight days of annual leave. " * 20
# What the title and the one returnable field take of every response, as search counts them.
CARRIED = len(TITLE) + len("email") + len(EMAIL)
HOURLY = 100_000

_MAPPING = make_mapping(
    "m-s-1",
    source_id="s-1",
    fields=(make_field("title"), make_field("body"), make_field("email", searchable=False)),
)


def _row(title: str = TITLE, body: str = BODY, email: str = EMAIL) -> dict[str, Any]:
    return {"col_id": "7", "col_title": title, "col_body": body, "col_email": email}


def _snapshot(size_cap_chars: int) -> ConfigSnapshot:
    return make_snapshot(
        [make_source("s-1")],
        mappings=[_MAPPING],
        exposure=make_exposure(fetch_enabled=True, size_cap_chars=size_cap_chars),
    )


class _World:
    """One record, a search path and a fetch path over the same ports, and its reference."""

    def __init__(self, size_cap_chars: int, row: MappingABC[str, Any] | None = None) -> None:
        self.clock = FakeClock()
        self.config = InMemoryConfigRepository([_snapshot(size_cap_chars)])
        self.audit = InMemoryAuditSink()
        self.quota = InMemoryQuotaStore(self.clock)
        keyring = Keyring.generate("k1")
        providers = {"s-1": InMemorySearchProvider({"m-s-1": [dict(row or _row())]})}
        self.retriever = Retriever(
            config=self.config,
            providers=providers,
            model=FakeLanguageModel(),
            audit=self.audit,
            clock=self.clock,
            keyring=keyring,
            tenant_id=TENANT,
        )
        self.fetcher = DocumentFetcher(
            config=self.config,
            providers=providers,
            audit=self.audit,
            keyring=keyring,
            quota=self.quota,
            hourly_chars=HOURLY,
            clock=self.clock,
            executor=self.retriever.executor,
            tenant_id=TENANT,
        )
        self.ctx = make_context()
        minter = DocumentRefMinter(keyring=keyring, clock=self.clock, ctx=self.ctx)
        self.ref = minter.mint(EXPOSURE_ID, DocumentLocator("s-1", "m-s-1", "7"))

    def cap(self, size_cap_chars: int) -> None:
        """Republish the exposure with another size cap."""
        self.config.put(_snapshot(size_cap_chars))

    async def fetch(self, offset: int = 0, max_chars: int = 100_000) -> FetchedDocument:
        return await self.fetcher.fetch(self.ctx, self.ref, offset=offset, max_chars=max_chars)

    async def surfaced_titles(self) -> list[str]:
        response = await self.retriever.retrieve(self.ctx, "annual leave")
        return [r.title for r in response.results]

    async def quota_untouched(self) -> bool:
        """Whether the caller still has the whole hour's budget (consuming it, so ask once)."""
        return await self.quota.consume(TENANT, self.ctx.caller.key, HOURLY, HOURLY)

    def fetches(self) -> list[Any]:
        return self.audit.events(AuditEvent.FETCH)


def _response_chars(document: FetchedDocument) -> int:
    """Every character a response carries, as search's size cap counts a result."""
    fields = sum(len(name) + len(value) for name, value in document.fields.items())
    return len(document.title) + fields + len(document.text)


async def test_the_title_and_fields_count_against_the_size_cap() -> None:
    world = _World(size_cap_chars=100)

    page = await world.fetch(max_chars=10_000)

    assert (page.title, dict(page.fields)) == (TITLE, {"email": EMAIL})
    assert page.text == BODY[: 100 - CARRIED]
    assert _response_chars(page) == 100
    assert (page.has_more, page.next_offset) == (True, 100 - CARRIED)


async def test_a_smaller_max_chars_than_the_cap_leaves_is_served_as_asked() -> None:
    world = _World(size_cap_chars=100)
    page = await world.fetch(offset=5, max_chars=10)
    assert page.text == BODY[5:15]


async def test_paging_under_a_tight_cap_rebuilds_the_text_and_every_page_fits() -> None:
    world = _World(size_cap_chars=CARRIED + 7)
    pages: list[str] = []
    offset: int | None = 0
    while offset is not None:
        page = await world.fetch(offset=offset)
        assert _response_chars(page) <= CARRIED + 7
        assert page.text or not page.has_more
        pages.append(page.text)
        offset = page.next_offset
    assert "".join(pages) == BODY
    assert len(pages) == -(-len(BODY) // 7)


@pytest.mark.parametrize(
    "cap",
    [
        pytest.param(CARRIED, id="title-and-fields-fill-the-cap"),
        pytest.param(CARRIED - 1, id="title-and-fields-exceed-the-cap"),
        pytest.param(10, id="cap-below-the-title"),
    ],
)
async def test_a_record_too_large_for_the_cap_is_not_found_uncharged_and_audited(
    cap: int,
) -> None:
    """The cap was lowered after the record surfaced: search under it drops the record, and
    a fetch refuses it too — never an empty page pointing at itself, never over the cap."""
    world = _World(size_cap_chars=100_000)
    assert await world.surfaced_titles() == [TITLE]
    world.cap(cap)

    for offset in (0, 5, len(BODY), len(BODY) + 10):
        with pytest.raises(DocumentNotFoundError) as refused:
            await world.fetch(offset=offset)
        assert refused.value.code is ErrorCode.ESRA_DOCUMENT_NOT_FOUND

    assert await world.surfaced_titles() == []
    assert await world.quota_untouched()
    records = world.fetches()
    assert len(records) == 4
    for record in records:
        assert (record.outcome, record.reason) == (
            "denied",
            ErrorCode.ESRA_DOCUMENT_NOT_FOUND.value,
        )
        # The operator learns why: what the title and fields carry, against which cap.
        assert record.dimensions["size_cap_chars"] == cap
        assert record.dimensions["carried_chars"] == CARRIED
        assert record.dimensions["source_id"] == "s-1"
        assert "chars" not in record.dimensions


async def test_other_not_found_records_do_not_claim_the_size_cap() -> None:
    world = _World(size_cap_chars=100)
    world.ref = world.ref[:-2]
    with pytest.raises(DocumentNotFoundError):
        await world.fetch()
    [record] = world.fetches()
    assert "size_cap_chars" not in record.dimensions
    assert "carried_chars" not in record.dimensions


async def test_a_record_with_no_text_is_served_when_its_title_and_fields_fill_the_cap() -> None:
    """Nothing is left to page: the response is exactly the cap, and the paging ends."""
    world = _World(size_cap_chars=CARRIED, row=_row(body=""))
    page = await world.fetch()
    assert (page.text, page.has_more, page.next_offset, page.total_chars) == ("", False, None, 0)
    assert _response_chars(page) == CARRIED


_TEXT = st.text(st.characters(codec="utf-8"), max_size=60)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    title=_TEXT,
    email=_TEXT,
    body=st.text(st.characters(codec="utf-8"), max_size=300),
    cap=st.integers(1, 500),  # a cap below one character is refused as configuration
    offset=st.integers(0, 400),
    max_chars=st.integers(1, 400),
)
async def test_every_fetch_fits_the_cap_or_is_refused_whole(
    *, title: str, email: str, body: str, cap: int, offset: int, max_chars: int
) -> None:
    """Served: within the cap, the exact slice the cap leaves room for, never an empty page
    with more to come. Refused: exactly when title and fields leave no room for one
    character of text, uncharged."""
    whole = await _World(size_cap_chars=10**9, row=_row(title, body, email)).fetch()
    carried = _response_chars(whole) - len(whole.text)
    world = _World(size_cap_chars=cap, row=_row(title, body, email))

    if carried + min(1, len(whole.text)) > cap:
        with pytest.raises(DocumentNotFoundError):
            await world.fetch(offset=offset, max_chars=max_chars)
        assert await world.quota_untouched()
        return

    page = await world.fetch(offset=offset, max_chars=max_chars)
    assert _response_chars(page) <= cap
    assert page.text == whole.text[offset : offset + min(max_chars, cap - carried)]
    assert page.text or not page.has_more
    assert page.total_chars == len(whole.text)
