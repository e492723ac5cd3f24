"""A sandbox server that dies under a document is the host's failure, not the document's.

The server only relays bytes and answers; each document is read in a child of its own, whose
own deaths (its limits, a crash) are classified where the child is reaped. A server that
died (killed by the OOM killer, by an operator, by a stop signal) said nothing about the
document, yet failed it for good as ``MALFORMED_DOCUMENT`` at its first attempt: a healthy
document lost to an incident, recoverable only by an operator's re-index. It is retried,
within the attempt ceiling, like any other transient failure.
"""

from __future__ import annotations

import subprocess

import pytest

from esra.core._docstore import extraction
from esra.core._docstore._text_pdf import text_pdf
from esra.core._docstore.ingestion import IngestionWorker, upload_files
from esra.core._docstore.model import DocumentState, StoreSettings
from esra.core._docstore.sandbox import ExtractionSandbox
from esra.core.codes import DocumentRefusal
from esra.core.testing import FakeClock
from esra.core.testing._docstore import InMemoryDocumentRepository

TENANT = "tenant-a"


class _DyingSandbox(ExtractionSandbox):
    """Every server it starts dies as the request is sent to it."""

    def _start(self) -> subprocess.Popen[bytes] | None:
        server = super()._start()
        assert server is not None
        server.kill()
        server.wait()
        return server


async def _pending_pdf(
    max_attempts: int = 3,
) -> tuple[InMemoryDocumentRepository, IngestionWorker, str]:
    """A store holding one Pending PDF, its id, and a worker over it taking one document a
    turn, at ``max_attempts``."""
    repository, clock = InMemoryDocumentRepository(), FakeClock()
    data = text_pdf(["Quarterly figures for the quokka sanctuary."])
    (outcome,) = await upload_files(
        repository, TENANT, [("figures.pdf", data)], scope="all", clock=clock
    )
    assert outcome.document is not None
    worker = IngestionWorker(
        repository,
        worker_id="w1",
        clock=clock,
        settings_for=lambda _t: StoreSettings(batch_per_tenant=1, max_attempts=max_attempts),
    )
    return repository, worker, outcome.document.id


async def test_a_dead_sandbox_server_retries_the_document(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repository, worker, document_id = await _pending_pdf(max_attempts=2)
    with _DyingSandbox(max_servers=1) as dying:
        monkeypatch.setattr(extraction, "default_sandbox", lambda: dying)
        (turn,) = await worker.run_turn()
        assert (turn.retried, turn.failed) == (1, 0)
        document = await repository.get(TENANT, document_id)
        assert document is not None
        assert document.state is DocumentState.PENDING
        # At the ceiling it fails, classified, as any retried failure does.
        (turn,) = await worker.run_turn()
    assert (turn.retried, turn.failed) == (0, 1)
    document = await repository.get(TENANT, document_id)
    assert document is not None
    assert (document.state, document.failure) == (
        DocumentState.FAILED,
        DocumentRefusal.MALFORMED_DOCUMENT,
    )


async def test_the_sandbox_servers_death_leaves_the_worker_indexing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Retried, the document is indexed by a server that lives."""
    repository, worker, document_id = await _pending_pdf()
    with _DyingSandbox(max_servers=1) as dying:
        monkeypatch.setattr(extraction, "default_sandbox", lambda: dying)
        await worker.run_turn()
    with ExtractionSandbox(max_servers=1) as living:
        monkeypatch.setattr(extraction, "default_sandbox", lambda: living)
        (turn,) = await worker.run_turn()
    assert turn.indexed == 1
    document = await repository.get(TENANT, document_id)
    assert document is not None
    assert document.state is DocumentState.INDEXED
