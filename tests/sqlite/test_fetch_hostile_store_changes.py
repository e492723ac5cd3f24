"""A reference minted before its document changed in the store: only a live document opens.

Each reference is minted by a real search over a seeded SQLite store; the document is then
deleted or re-queued through the repository, and the very same reference fetched again.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from esra.core._audit.logging_sink import LoggingAuditSink
from esra.core._context import CallerIdentity, InvocationContext
from esra.core._fetch.service import DocumentFetcher
from esra.core._quota import InProcessQuotaStore
from esra.core._retriever import Retriever
from esra.core._static_config import StaticConfigRepository
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
from tests.sqlite.test_docstore_search import ACME, APP, SLUG, _close, _seed, _snapshot

_HR = InvocationContext(
    tenant_id=ACME,
    client_app_id=APP,
    caller=CallerIdentity(subject="tester", claims={DEFAULT_SCOPE_CLAIM: ("hr",)}),
    exposure_slug=SLUG,
    correlation_id="fetch-after-change",
)


async def test_a_reference_to_a_deleted_or_requeued_document_is_not_found(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store.db"
    ids = await _seed(path)
    _, mapping = store_source(ACME)
    provider = SqliteFts5Provider(path, mappings=(mapping,))
    snapshot = _snapshot(ACME)
    exposure = attrs.evolve(snapshot.exposures[0], fetch_enabled=True)
    config = StaticConfigRepository([attrs.evolve(snapshot, exposures=(exposure,))])
    keyring = Keyring.generate("k1")
    retriever = Retriever(
        config=config,
        providers={mapping.source_id: provider},
        model=LocalModel(),
        audit=LoggingAuditSink(),
        keyring=keyring,
    )
    fetcher = DocumentFetcher(
        config=config,
        providers={mapping.source_id: provider},
        audit=LoggingAuditSink(),
        keyring=keyring,
        quota=InProcessQuotaStore(),
        executor=retriever.executor,
    )
    repository = SqliteDocumentRepository(path)
    clock = FakeClock()
    try:
        refs: dict[str, str] = {}
        for role, question in (
            ("fmla", "FMLA leave for a servicemember"),
            ("parental", "paid parental leave"),
        ):
            response = await retriever.retrieve(_HR, question)
            result = next(r for r in response.results if r.fields["document_id"] == ids[role])
            assert result.document_ref is not None
            refs[role] = result.document_ref
            assert (await fetcher.fetch(_HR, refs[role])).text

        assert await repository.soft_delete(ACME, ids["fmla"], now=clock.now())
        assert await repository.reindex(ACME, ids["parental"], now=clock.now()) is not None

        for role in ("fmla", "parental"):
            with pytest.raises(DocumentNotFoundError):
                await fetcher.fetch(_HR, refs[role])
    finally:
        await repository.close()
        await _close(provider)
