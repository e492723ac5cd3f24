"""The document store searched through the ordinary pipeline, on SQLite, end to end.

Real documents (18F handbook pages, a textract .docx, an OWASP page about prompt injection)
are uploaded with ``upload_files``, ingested by one ``IngestionWorker`` turn, then searched
by ``Retriever`` with ``SqliteFts5Provider`` over the store file and ``LocalModel``. One
store file holds two tenants; both tenants' configurations use the same provider, so tenant
isolation must come from the query itself.
"""

from __future__ import annotations

import asyncio
import inspect
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Protocol

import attrs
import pytest

from esra.core._audit.logging_sink import LoggingAuditSink
from esra.core._context import CallerIdentity, ClaimValue, InvocationContext
from esra.core._docstore.extraction import extract
from esra.core._docstore.ingestion import IngestionWorker, upload_files
from esra.core._docstore.model import DocumentState
from esra.core._docstore.upload import inspect_upload
from esra.core._fetch.service import DocumentFetcher
from esra.core._quota import InProcessQuotaStore
from esra.core._response import RetrievalResponse
from esra.core._retriever import Retriever
from esra.core._static_config import StaticConfigRepository
from esra.core.codes import DocumentRefusal, WarningCode
from esra.core.config import (
    AccessPolicy,
    BindingMode,
    Capability,
    ConfigSnapshot,
    Exposure,
    SourceBinding,
)
from esra.core.exceptions import DocumentNotFoundError
from esra.core.fetch import Keyring
from esra.core.testing import FakeClock
from esra.llm import LocalModel
from esra.sqlite import (
    DEFAULT_SCOPE_CLAIM,
    SqliteDocumentRepository,
    SqliteFts5Provider,
    store_source,
)
from tests._external import shared_data

pytestmark = [pytest.mark.integration, pytest.mark.external_data]

ACME, GLOBEX = "acme", "globex"
APP, SLUG = "assistant", "docs"
HANDBOOK = "documents/markdown_policies_18F_handbook/travel-and-leave"
DOCX = "documents/textract_with_expected_text/docx/paragraphs_and_tables.docx"
OWASP = "prompt_injection/benign_about_prompt_injection/OWASP_LLM01_PromptInjection.md"
BROKEN_PDF = b"%PDF-1.7\n1 0 obj << /Type /Catalog >> truncated quokka budget\n"


@attrs.frozen
class Store:
    """The seeded store file and the ids of its documents by role."""

    path: Path
    ids: dict[str, str]


def _file(relative: str) -> tuple[str, bytes]:
    path = shared_data(relative)
    return path.name, path.read_bytes()


async def _seed(path: Path) -> dict[str, str]:
    clock = FakeClock()
    repository = SqliteDocumentRepository(path)
    await repository.initialize()
    ids: dict[str, str] = {}

    async def upload(tenant: str, role: str, scope: str, name: str, data: bytes) -> None:
        (outcome,) = await upload_files(
            repository, tenant, [(name, data)], scope=scope, clock=clock
        )
        assert outcome.document is not None, outcome
        ids[role] = outcome.document.id

    try:
        await upload(ACME, "fmla", "hr", *_file(f"{HANDBOOK}/fmla.md"))
        await upload(ACME, "parental", "hr", *_file(f"{HANDBOOK}/paid-parental-leave.md"))
        await upload(ACME, "docx", "engineering", *_file(DOCX))
        await upload(ACME, "owasp", "hr", *_file(OWASP))
        await upload(ACME, "overtime", "hr", *_file(f"{HANDBOOK}/overtime.md"))
        await upload(ACME, "sick", "hr", *_file(f"{HANDBOOK}/advanced-sick-leave.md"))
        await upload(ACME, "broken", "hr", "budget.pdf", BROKEN_PDF)
        await upload(GLOBEX, "globex", "hr", *_file(f"{HANDBOOK}/going-out-of-office.md"))
        worker = IngestionWorker(repository, worker_id="w1", clock=clock)
        turns = {t.tenant_id: t for t in await worker.run_turn()}
        assert (turns[ACME].indexed, turns[ACME].quarantined, turns[ACME].failed) == (5, 1, 1)
        assert turns[GLOBEX].indexed == 1
        # After the turn: one deleted, one re-queued (its old segments stay stored), one new.
        assert await repository.soft_delete(ACME, ids["overtime"], now=clock.now())
        assert await repository.reindex(ACME, ids["sick"], now=clock.now()) is not None
        await upload(
            ACME, "pending", "hr", *_file(f"{HANDBOOK}/voluntary-leave-transfer-program.md")
        )
        counts = await repository.counts(ACME)
        assert counts[DocumentState.QUARANTINED] == 1
        assert counts[DocumentState.FAILED] == 1
        assert counts[DocumentState.PENDING] == 2
        broken = await repository.get(ACME, ids["broken"])
        assert broken is not None
        assert broken.failure is DocumentRefusal.MALFORMED_DOCUMENT
    finally:
        await repository.close()
    return ids


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """One store file, seeded and ingested once for the module (the writer is closed)."""
    path = tmp_path_factory.mktemp("docstore") / "store.db"
    return Store(path=path, ids=asyncio.run(_seed(path)))


def _snapshot(tenant: str) -> ConfigSnapshot:
    source, mapping = store_source(tenant)
    capability = Capability(
        id="docs",
        tenant_id=tenant,
        name="Document search",
        bindings=(SourceBinding(source.id, BindingMode.MANDATORY),),
    )
    exposure = Exposure(
        id="docs-exposure",
        tenant_id=tenant,
        slug=SLUG,
        capability_id=capability.id,
        audience=frozenset({APP}),
        published=True,
        top_k=10,
        fragment_chars=300,
    )
    return ConfigSnapshot(
        tenant_id=tenant,
        version=f"{tenant}-1",
        sources=(source,),
        mappings=(mapping,),
        capabilities=(capability,),
        exposures=(exposure,),
        access_policies=(AccessPolicy.matching(exposure),),
    )


class Ask(Protocol):
    """Ask a question as a caller of ``tenant`` holding ``claims``."""

    async def __call__(
        self, question: str, *, tenant: str = ..., claims: dict[str, ClaimValue] | None = ...
    ) -> RetrievalResponse:
        """Run the whole retrieval pipeline for ``question``."""
        ...


EVERY_SCOPE: dict[str, ClaimValue] = {DEFAULT_SCOPE_CLAIM: ("hr", "engineering")}


@pytest.fixture
async def ask(store: Store) -> AsyncIterator[Ask]:
    """A question asker over one read-only provider shared by both tenants' configurations."""
    _, mapping = store_source(ACME)
    provider = SqliteFts5Provider(store.path, mappings=(mapping,))
    retriever = Retriever(
        config=StaticConfigRepository([_snapshot(ACME), _snapshot(GLOBEX)]),
        providers={mapping.source_id: provider},
        model=LocalModel(),
        audit=LoggingAuditSink(),
    )

    async def run(
        question: str, *, tenant: str = ACME, claims: dict[str, ClaimValue] | None = None
    ) -> RetrievalResponse:
        context = InvocationContext(
            tenant_id=tenant,
            client_app_id=APP,
            caller=CallerIdentity(
                subject="tester", claims=EVERY_SCOPE if claims is None else claims
            ),
            exposure_slug=SLUG,
            correlation_id="docstore-search",
        )
        return await retriever.retrieve(context, question)

    yield run
    await _close(provider)


async def _close(provider: object) -> None:
    """Close a provider whose ``close()`` may be synchronous or asynchronous."""
    close = getattr(provider, "close", None)
    result = close() if callable(close) else None
    if inspect.isawaitable(result):
        await result


def _segment_bodies(
    path: Path, document_id: str, *, containing: str = "", ordinal: int | None = None
) -> list[str]:
    """The whitespace-collapsed bodies of a document's stored segments, filtered."""
    connection = sqlite3.connect(path)
    try:
        rows = connection.execute(
            "SELECT ordinal, body FROM store_segments WHERE document_id = ? ORDER BY ordinal",
            (document_id,),
        ).fetchall()
    finally:
        connection.close()
    return [
        " ".join(body.split())
        for number, body in rows
        if containing in body and (ordinal is None or number == ordinal)
    ]


def _documents(response: RetrievalResponse) -> list[str]:
    return [item.fields["document_id"] for item in response.results]


async def test_results_are_documents_with_their_best_segment_as_fragment(
    store: Store, ask: Ask
) -> None:
    """Segments roll up to one result per document; the matching segment is the fragment."""
    response = await ask("Can I take FMLA leave to care for an ill servicemember or veteran?")
    documents = _documents(response)
    assert len(documents) == len(set(documents))
    assert documents[0] == store.ids["fmla"]
    best = response.results[0]
    assert (best.title, best.source) == ("fmla.md", "Internal documents")
    # "servicemember" is in one section only, not the document's opening one: the fragment
    # is cut from that section.
    section = _segment_bodies(store.path, store.ids["fmla"], containing="servicemember")
    opening = _segment_bodies(store.path, store.ids["fmla"], ordinal=0)
    assert len(section) == 1
    assert len(opening) == 1
    assert opening != section
    piece = best.fragment.strip("…")[:80]
    assert piece in section[0]
    assert piece not in opening[0]
    assert "tenant" not in best.fields
    assert "scope" not in best.fields


async def test_a_docx_is_found_by_its_extracted_text(store: Store, ask: Ask) -> None:
    """Word documents are searched through the same path as Markdown."""
    response = await ask("the paragraph before the table")
    assert store.ids["docx"] in _documents(response)


async def test_only_indexed_live_documents_are_ever_returned(store: Store, ask: Ask) -> None:
    """Quarantined, failed, pending, re-queued and deleted documents never appear."""
    questions = (
        "prompt injection attacks against large language models",
        "overtime compensatory time off and credit hours",
        "advanced sick leave",
        "voluntary leave transfer program donations",
        "quokka budget",
    )
    found: set[str] = set()
    for question in questions:
        found.update(_documents(await ask(question)))
    assert found <= {store.ids[r] for r in ("fmla", "parental", "docx")}
    # The quarantined and failed content is stored and indexed: it is the view that keeps it
    # out. The deleted document's is not there at all: deleting erases it.
    connection = sqlite3.connect(store.path)
    try:
        stored = {
            row[0]
            for row in connection.execute(
                "SELECT s.document_id FROM store_segments AS s JOIN store_segments_fts AS f "
                "ON f.rowid = s.id WHERE store_segments_fts MATCH 'overtime OR injection OR sick'"
            )
        }
    finally:
        connection.close()
    assert {store.ids[r] for r in ("owasp", "sick")} <= stored
    assert store.ids["overtime"] not in stored


async def test_another_tenants_documents_never_appear(store: Store, ask: Ask) -> None:
    """The same provider and file serve both tenants; each sees only its own documents."""
    question = "going out of office: telling your team before you leave"
    theirs = _documents(await ask(question, tenant=GLOBEX))
    assert theirs == [store.ids["globex"]]
    mine = _documents(await ask(question))
    assert store.ids["globex"] not in mine
    forged = {**EVERY_SCOPE, "esra.tenant_id": GLOBEX}
    assert store.ids["globex"] not in _documents(await ask(question, claims=forged))


async def test_the_scope_claim_limits_which_documents_are_searched(store: Store, ask: Ask) -> None:
    """A document is found only by callers whose scope claim includes its scope."""
    question = "the paragraph before the table"
    engineering = await ask(question, claims={DEFAULT_SCOPE_CLAIM: ("engineering",)})
    assert _documents(engineering) == [store.ids["docx"]]
    hr = await ask(question, claims={DEFAULT_SCOPE_CLAIM: "hr"})
    assert store.ids["docx"] not in _documents(hr)


async def test_a_caller_without_the_scope_claim_has_the_store_dropped(ask: Ask) -> None:
    """Fail closed: no claim, no search, and the warning says why."""
    response = await ask("Can I take FMLA leave?", claims={})
    assert response.results == ()
    codes = [w.code for w in response.warnings]
    assert WarningCode.ESRA_SOURCE_DROPPED_MISSING_CLAIM in codes


async def test_a_fetch_returns_the_whole_document_with_an_exact_total(store: Store) -> None:
    """esra_{slug}_fetch on the store: every segment, in order, re-filtered by scope."""
    _, mapping = store_source(ACME)
    provider = SqliteFts5Provider(store.path, mappings=(mapping,))
    snapshot = _snapshot(ACME)
    exposure = attrs.evolve(snapshot.exposures[0], fetch_enabled=True, size_cap_chars=1_000_000)
    config = StaticConfigRepository([attrs.evolve(snapshot, exposures=(exposure,))])
    keyring = Keyring.generate("k1")
    audit = LoggingAuditSink()
    retriever = Retriever(
        config=config,
        providers={mapping.source_id: provider},
        model=LocalModel(),
        audit=audit,
        keyring=keyring,
    )
    fetcher = DocumentFetcher(
        config=config,
        providers={mapping.source_id: provider},
        audit=audit,
        keyring=keyring,
        quota=InProcessQuotaStore(),
        executor=retriever.executor,
    )

    def caller(scopes: tuple[str, ...]) -> InvocationContext:
        return InvocationContext(
            tenant_id=ACME,
            client_app_id=APP,
            caller=CallerIdentity(subject="tester", claims={DEFAULT_SCOPE_CLAIM: scopes}),
            exposure_slug=SLUG,
            correlation_id="docstore-fetch",
        )

    try:
        response = await retriever.retrieve(caller(("hr",)), "FMLA leave for a servicemember")
        best = response.results[0]
        assert best.fields["document_id"] == store.ids["fmla"]
        assert best.document_ref is not None
        document = await fetcher.fetch(caller(("hr",)), best.document_ref, max_chars=1_000_000)
        # The scope claim is re-evaluated: a caller who lost "hr" no longer finds it.
        with pytest.raises(DocumentNotFoundError):
            await fetcher.fetch(caller(("engineering",)), best.document_ref)
    finally:
        await _close(provider)

    connection = sqlite3.connect(store.path)
    try:
        bodies = [
            body
            for (body,) in connection.execute(
                "SELECT body FROM store_segments WHERE document_id = ? ORDER BY ordinal",
                (store.ids["fmla"],),
            )
        ]
    finally:
        connection.close()
    assert len(bodies) > 1
    # The segments are slices of the extracted text: concatenated, they are the document.
    name, data = _file(f"{HANDBOOK}/fmla.md")
    extracted = extract(inspect_upload(name, data)).text
    assert document.text == "".join(bodies) == extracted
    assert (document.total_chars, document.has_more) == (len(extracted), False)
    assert document.title == "fmla.md"
    assert "tenant" not in document.fields
    assert "scope" not in document.fields
