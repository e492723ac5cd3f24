"""The management search's share of the ``DocumentRepository`` contract.

``DocumentRepositoryContract`` inherits these tests, so every repository proves them: every
state listed (soft-deleted never), one tenant only, text through the full-text index over
segments or through the title, each structured filter, keyset paging without repeats or
gaps, and hostile text (FTS operators, quotes, LIKE wildcards) searched for as literals.

The words searched for are written as they are indexed (no stemming, no stop words), so
FTS5's porter stemmer, PostgreSQL's configuration and the in-memory token match agree.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta, timezone

import pytest

from esra.core._docstore.formats import DocumentFormat
from esra.core._docstore.model import DocumentState, IndexedContent, StoredDocument, StoredSegment
from esra.core._docstore.repository import DocumentRepository
from esra.core._docstore.search import DocumentPage, DocumentSearch
from esra.core._docstore.upload import AcceptedUpload
from esra.core.codes import DocumentRefusal

__all__ = ["DocumentSearchContract"]

_T0 = datetime(2026, 4, 1, 12, 0, tzinfo=UTC)
_TENANT = "search-tenant"
_OTHER = "search-other"


def _at(seconds: float) -> datetime:
    return _T0 + timedelta(seconds=seconds)


def _upload(name: str, body: str, document_format: DocumentFormat) -> AcceptedUpload:
    data = f"{name}\n{body}".encode()
    return AcceptedUpload(
        display_name=name,
        format=document_format,
        data=data,
        sha256=hashlib.sha256(data).hexdigest(),
    )


async def _pending(
    repository: DocumentRepository,
    name: str,
    *,
    at: float,
    tenant: str = _TENANT,
    scope: str = "all",
    document_format: DocumentFormat = DocumentFormat.TXT,
) -> StoredDocument:
    upload = _upload(name, "", document_format)
    return await repository.add(tenant, upload, scope=scope, now=_at(at))


async def _extracted(
    repository: DocumentRepository,
    name: str,
    *bodies: str,
    at: float,
    tenant: str = _TENANT,
    scope: str = "all",
    state: DocumentState = DocumentState.INDEXED,
    document_format: DocumentFormat = DocumentFormat.TXT,
) -> StoredDocument:
    """Add, claim and complete one document; call while the tenant has nothing pending."""
    upload = _upload(name, "".join(bodies), document_format)
    document = await repository.add(tenant, upload, scope=scope, now=_at(at))
    (claim,) = await repository.claim(
        tenant, worker_id="w", limit=1, lease_s=60.0, max_attempts=3, now=_at(at)
    )
    assert claim.document_id == document.id
    segments = tuple(
        StoredSegment(ordinal=i, label=f"part {i + 1}", body=body, indexed=body)
        for i, body in enumerate(bodies)
    )
    content = IndexedContent(text="".join(bodies), segments=segments, findings=(), state=state)
    assert await repository.complete(claim, content, now=_at(at))
    return document


async def _failed(repository: DocumentRepository, name: str, *, at: float) -> StoredDocument:
    document = await _pending(repository, name, at=at)
    (claim,) = await repository.claim(
        _TENANT, worker_id="w", limit=1, lease_s=60.0, max_attempts=3, now=_at(at)
    )
    assert claim.document_id == document.id
    assert await repository.fail(
        claim, DocumentRefusal.PASSWORD_PROTECTED, retry=False, now=_at(at)
    )
    return document


async def _titles(repository: DocumentRepository, query: DocumentSearch) -> list[str]:
    page = await repository.search_documents(_TENANT, query)
    return [document.title for document in page.documents]


@pytest.mark.asyncio
class DocumentSearchContract:
    """``search_documents`` rules; mixed into ``DocumentRepositoryContract``."""

    async def test_search_lists_every_state_newest_first_but_never_deleted(
        self, repository: DocumentRepository
    ) -> None:
        await _extracted(repository, "indexed.txt", "Plain text.", at=1)
        await _extracted(
            repository, "held.txt", "Held text.", at=2, state=DocumentState.QUARANTINED
        )
        await _failed(repository, "failed.txt", at=3)
        gone = await _extracted(repository, "gone.txt", "Deleted text.", at=4)
        assert await repository.soft_delete(_TENANT, gone.id, now=_at(5))
        await _pending(repository, "pending.txt", at=6)
        titles = await _titles(repository, DocumentSearch())
        assert titles == ["pending.txt", "failed.txt", "held.txt", "indexed.txt"]
        assert await _titles(repository, DocumentSearch(text="deleted")) == []

    async def test_search_is_confined_to_the_tenant(self, repository: DocumentRepository) -> None:
        await _extracted(repository, "ours.txt", "Shared vocabulary here.", at=1)
        await _extracted(repository, "theirs.txt", "Shared vocabulary here.", at=2, tenant=_OTHER)
        await _pending(repository, "theirs-pending.txt", at=3, tenant=_OTHER)
        assert await _titles(repository, DocumentSearch()) == ["ours.txt"]
        assert await _titles(repository, DocumentSearch(text="vocabulary")) == ["ours.txt"]
        assert await _titles(repository, DocumentSearch(text="theirs")) == []
        other = await repository.search_documents(_OTHER, DocumentSearch(text="theirs"))
        assert {d.title for d in other.documents} == {"theirs.txt", "theirs-pending.txt"}

    async def test_text_matches_a_segment_holding_every_word(
        self, repository: DocumentRepository
    ) -> None:
        await _extracted(repository, "a.txt", "Budget review for marketing.", at=1)
        await _extracted(repository, "b.txt", "Budget notes.", "Marketing plans.", at=2)
        await _extracted(
            repository,
            "c.txt",
            "Marketing budget, reviewed.",
            at=3,
            state=DocumentState.QUARANTINED,
        )
        # Any order, any case; the quarantined document is found too (retrieval never would).
        assert await _titles(repository, DocumentSearch(text="MARKETING budget")) == [
            "c.txt",
            "a.txt",
        ]
        # Words in different segments do not make a match: segments are what is indexed.
        assert await _titles(repository, DocumentSearch(text="notes plans")) == []
        assert await _titles(repository, DocumentSearch(text="plans")) == ["b.txt"]
        assert await _titles(repository, DocumentSearch(text="absentword")) == []

    async def test_text_finds_documents_without_text_by_their_title(
        self, repository: DocumentRepository
    ) -> None:
        await _extracted(repository, "Holiday-Rota.txt", "Nothing relevant.", at=1)
        await _failed(repository, "holiday-locked.pdf.txt", at=2)
        await _pending(repository, "Quarterly HOLIDAY plan.txt", at=3)
        await _pending(repository, "unrelated.txt", at=4)
        assert await _titles(repository, DocumentSearch(text="holiday")) == [
            "Quarterly HOLIDAY plan.txt",
            "holiday-locked.pdf.txt",
            "Holiday-Rota.txt",
        ]
        # A title matches on the whole text as written, inside a word too.
        assert await _titles(repository, DocumentSearch(text="day-lo")) == [
            "holiday-locked.pdf.txt"
        ]

    @pytest.mark.parametrize(
        "hostile",
        [
            '"alpha" OR beta* NEAR(gamma delta) ^col: -- ; DROP TABLE x',
            '"',
            "*",
            "(",
            "NOT",
            "a AND",
            "'; SELECT 1; --",
            "\\",
            "{col}: x",
            "a:* & !b | <-> c",
        ],
    )
    async def test_hostile_text_is_searched_for_never_obeyed(
        self, repository: DocumentRepository, hostile: str
    ) -> None:
        await _extracted(repository, "plain.txt", "Ordinary words only.", at=1)
        await _pending(repository, "waiting.txt", at=2)
        assert await _titles(repository, DocumentSearch(text=hostile)) == []

    async def test_operator_words_and_wildcards_are_literals(
        self, repository: DocumentRepository
    ) -> None:
        await _extracted(repository, "pets.txt", "Cats and dogs.", at=1)
        await _extracted(repository, "near.txt", "Stand near the door.", at=2)
        await _pending(repository, "50% off.txt", at=3)
        await _pending(repository, "500 off.txt", at=4)
        await _pending(repository, 'say "hi" (twice).txt', at=5)
        assert await _titles(repository, DocumentSearch(text="AND")) == ["pets.txt"]
        assert await _titles(repository, DocumentSearch(text="NEAR")) == ["near.txt"]
        assert await _titles(repository, DocumentSearch(text="50%")) == ["50% off.txt"]
        assert await _titles(repository, DocumentSearch(text="_")) == []
        assert await _titles(repository, DocumentSearch(text='"hi" (tw')) == [
            'say "hi" (twice).txt'
        ]

    async def test_each_structured_filter(self, repository: DocumentRepository) -> None:
        await _extracted(
            repository, "public.md", "Alpha.", at=10, document_format=DocumentFormat.MD
        )
        await _extracted(repository, "secret.txt", "Alpha.", at=20, scope="restricted")
        await _extracted(
            repository,
            "held.csv",
            "a,b\nAlpha,1",
            at=30,
            state=DocumentState.QUARANTINED,
            document_format=DocumentFormat.CSV,
        )
        await _pending(repository, "queued.md", at=40, document_format=DocumentFormat.MD)

        def search(**filters: object) -> DocumentSearch:
            return DocumentSearch(**filters)  # type: ignore[arg-type]

        assert await _titles(repository, search(scope="restricted")) == ["secret.txt"]
        assert await _titles(repository, search(scope="nobody")) == []
        assert await _titles(repository, search(formats={DocumentFormat.MD})) == [
            "queued.md",
            "public.md",
        ]
        assert await _titles(
            repository, search(formats={DocumentFormat.MD, DocumentFormat.CSV})
        ) == ["queued.md", "held.csv", "public.md"]
        assert await _titles(
            repository, search(states={DocumentState.QUARANTINED, DocumentState.PENDING})
        ) == ["queued.md", "held.csv"]
        # since inclusive, until exclusive, compared as instants whatever the offset.
        plus_two = _at(20).astimezone(timezone(timedelta(hours=2)))
        assert await _titles(
            repository, search(uploaded_since=plus_two, uploaded_until=_at(40))
        ) == ["held.csv", "secret.txt"]
        assert await _titles(repository, search(uploaded_until=_at(10))) == []
        # Filters combine with each other and with the text.
        assert await _titles(
            repository,
            search(text="alpha", states={DocumentState.INDEXED}, scope="all"),
        ) == ["public.md"]

    async def test_pages_walk_every_match_once_in_order(
        self, repository: DocumentRepository
    ) -> None:
        # Ties on created_at are ordered by id, so a page boundary inside a tie is exact.
        for index, at in enumerate((1, 2, 2, 2, 3, 4, 4)):
            await _extracted(repository, f"doc-{index}.txt", f"Common topic {index}.", at=at)
        await _extracted(repository, "odd.txt", "Something else.", at=5)
        full = await repository.search_documents(_TENANT, DocumentSearch(text="topic"))
        assert full.next_cursor is None
        expected = sorted(full.documents, key=lambda d: (d.created_at, d.id), reverse=True)
        assert list(full.documents) == expected
        assert len(expected) == 7
        seen: list[StoredDocument] = []
        cursor = None
        pages = 0
        while True:
            page: DocumentPage = await repository.search_documents(
                _TENANT, DocumentSearch(text="topic", limit=2, cursor=cursor)
            )
            pages += 1
            assert len(page.documents) <= 2
            seen.extend(page.documents)
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert pages == 4
        assert [d.id for d in seen] == [d.id for d in expected]

    async def test_an_exact_last_page_has_no_next_cursor(
        self, repository: DocumentRepository
    ) -> None:
        await _pending(repository, "one.txt", at=1)
        await _pending(repository, "two.txt", at=2)
        first = await repository.search_documents(_TENANT, DocumentSearch(limit=1))
        assert [d.title for d in first.documents] == ["two.txt"]
        assert first.next_cursor is not None
        second = await repository.search_documents(
            _TENANT, DocumentSearch(limit=1, cursor=first.next_cursor)
        )
        assert [d.title for d in second.documents] == ["one.txt"]
        assert second.next_cursor is None
        exact = await repository.search_documents(_TENANT, DocumentSearch(limit=2))
        assert len(exact.documents) == 2
        assert exact.next_cursor is None
