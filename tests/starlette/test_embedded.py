"""The embedded default searches its own document store on every question.

End to end: real 18F handbook pages go in with ``esra ingest`` (into ``$ESRA_HOME``, as a new
user's first run would), then questions that never mention documents — and that share words
with the HR handbook source, so selection has a clear favourite that is *not* the store —
go through the whole pipeline over MCP. The answer exists only in the ingested pages.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from esra.core.codes import AuditEvent
from esra.core.config import BindingMode
from esra.core.testing import InMemoryAuditSink
from esra.starlette._cli import main
from esra.starlette._data_dir import default_data_dir
from esra.starlette._devtoken import load_or_create_dev_issuer
from esra.starlette._embedded import EMBEDDED_CLIENT_APP, EMBEDDED_TENANT, embedded_snapshot
from esra.starlette._host import build_app
from esra.starlette._parts import open_embedded
from tests._external import shared_data
from tests.starlette._world import mcp_client

HANDBOOK = "documents/markdown_policies_18F_handbook/travel-and-leave"
PAGES = ("advanced-sick-leave.md", "voluntary-leave-transfer-program.md")
STORE = "Internal documents"
# (question, the page holding its answer, words of the answer in that page's fragment)
QUESTIONS = (
    ("How many hours of advanced sick leave can an employee request?", PAGES[0], "240 hours"),
    (
        "Can employees donate annual leave to a coworker with a medical emergency?",
        PAGES[1],
        "Voluntary Leave Transfer Program (VLTP) allows TTS employees",
    ),
)


async def _ask(
    data_dir: Path, prompts: list[str], claims: dict[str, Any]
) -> tuple[list[dict[str, Any]], InMemoryAuditSink]:
    """Ask each prompt of the embedded host's ``esra_larkspur`` tool as a dev-token caller."""
    token = load_or_create_dev_issuer(data_dir).mint(
        tenant=EMBEDDED_TENANT,
        subject="new-hire",
        client_app=EMBEDDED_CLIENT_APP,
        now=datetime.now(UTC),
        claims=claims,
        lifetime_s=600,
    )
    audit = InMemoryAuditSink()
    outputs = []
    async with open_embedded(data_dir) as parts:
        app = build_app(parts, host="127.0.0.1", port=8000, audit=audit)
        async with app.router.lifespan_context(app), mcp_client(app, token) as client:
            for prompt in prompts:
                found = await client.call_tool("esra_larkspur", {"prompt": prompt})
                assert found.structured_content is not None, found.content
                outputs.append(found.structured_content)
    return outputs, audit


def _searched(audit: InMemoryAuditSink) -> list[object]:
    """Per invocation, the sources selection handed to planning (forced and chosen)."""
    return [
        record.dimensions["selected_source_ids"]
        for record in audit.records
        if record.event is AuditEvent.SOURCES_SELECT
    ]


def _hits(output: dict[str, Any]) -> list[tuple[str, str]]:
    return [(r["title"], r["source"]) for r in output["results"]]


def test_the_store_is_bound_mandatory_in_the_embedded_default() -> None:
    """The store is the tenant's own corpus, so no selection heuristic decides whether it is
    searched; the demo databases stay optional, for the model to choose among."""
    snapshot = embedded_snapshot()
    modes = {b.source_id: b.mode for c in snapshot.capabilities for b in c.bindings}
    assert modes == {
        "catalog": BindingMode.OPTIONAL,
        "support": BindingMode.OPTIONAL,
        "hr": BindingMode.OPTIONAL,
        "internal-documents": BindingMode.MANDATORY,
    }


@pytest.mark.external_data
@pytest.mark.integration
def test_a_question_answered_only_by_ingested_pages_searches_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """After ``esra ingest`` of two handbook pages, questions about their content — worded
    like an employee would, never naming documents, and matching the HR handbook's metadata
    — search the store and return the page that answers them; a caller whose
    ``document_scopes`` lacks the pages' scope never gets them, and one without the claim is
    told the store was not searched."""
    monkeypatch.setenv("ESRA_HOME", str(tmp_path / "esra-home"))
    folder = shared_data(HANDBOOK)
    assert main(["ingest", *(str(folder / page) for page in PAGES)]) == 0
    assert "2 file(s): 2 indexed" in capsys.readouterr().err
    data_dir = default_data_dir()
    prompts = [question for question, _, _ in QUESTIONS]
    claims = {"region": "emea", "document_scopes": "general"}

    outputs, audit = asyncio.run(_ask(data_dir, prompts, claims))
    searched = _searched(audit)
    assert len(searched) == len(prompts)
    for source_ids in searched:
        assert isinstance(source_ids, tuple)
        assert "internal-documents" in source_ids
    for (question, page, words), output in zip(QUESTIONS, outputs, strict=True):
        assert output["status"] == "complete", (question, output["warnings"])
        hits = _hits(output)
        assert (page, STORE) in hits, (question, hits)
        # The answering page outranks every other document it was ingested with.
        assert next(title for title, source in hits if source == STORE) == page
        answer = next(r for r in output["results"] if r["title"] == page)
        assert words in " ".join(answer["fragments"]), answer["fragments"]

    other_scope, _ = asyncio.run(_ask(data_dir, prompts, {"document_scopes": "finance"}))
    for output in other_scope:
        assert STORE not in {source for _, source in _hits(output)}

    no_claim, _ = asyncio.run(_ask(data_dir, prompts, {"region": "emea"}))
    for output in no_claim:
        assert STORE not in {source for _, source in _hits(output)}
        codes = {w["code"] for w in output["warnings"]}
        assert "ESRA_SOURCE_DROPPED_MISSING_CLAIM" in codes
