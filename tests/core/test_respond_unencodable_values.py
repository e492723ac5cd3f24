"""What an odd database value does to a response: never fail the search it was found by.

Python text may hold a lone surrogate (U+D800–U+DFFF): a driver decoding UTF-16 data that
holds one (SQL Server and Oracle national character columns accept them), or a provider
decoding with ``surrogateescape``. No UTF-8 text can carry one, and a host writes every
response as UTF-8 JSON, so one such character in a title, fragment or field failed the
whole response; one in a record key failed minting the document references (``ESRA_INTERNAL``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from esra.core._response import RetrievalResponse
from esra.core._retriever import Retriever
from esra.core.config import BindingMode, SourceBinding
from esra.core.exceptions import EsraError
from esra.core.fetch import Keyring
from esra.core.testing import (
    FakeClock,
    FakeLanguageModel,
    InMemoryAuditSink,
    InMemoryConfigRepository,
    InMemorySearchProvider,
)
from tests.core.factories import (
    make_capability,
    make_context,
    make_exposure,
    make_field,
    make_mapping,
    make_snapshot,
    make_source,
)

LONE = "\ud800"


def _retriever(rows: list[dict[str, Any]]) -> Retriever:
    mapping = make_mapping(
        "m-s-1", fields=(make_field("title"), make_field("body"), make_field("owner"))
    )
    snapshot = make_snapshot(
        [make_source("s-1")],
        mappings=[mapping],
        capability=make_capability([SourceBinding("s-1", BindingMode.MANDATORY)]),
        exposure=make_exposure(fetch_enabled=True),
    )
    return Retriever(
        config=InMemoryConfigRepository([snapshot]),
        providers={"s-1": InMemorySearchProvider({"m-s-1": rows})},
        model=FakeLanguageModel(),
        audit=InMemoryAuditSink(),
        clock=FakeClock(),
        keyring=Keyring.generate("k1"),
    )


def _wire(response: RetrievalResponse) -> bytes:
    """The response as a host sends it: JSON text (non-ASCII kept), encoded as UTF-8."""
    document = [
        {"title": r.title, "fragment": r.fragment, "fields": dict(r.fields)}
        for r in response.results
    ]
    return json.dumps(document, ensure_ascii=False).encode("utf-8")


@pytest.mark.parametrize("column", ["col_title", "col_body", "col_owner"])
async def test_a_lone_surrogate_in_a_value_leaves_the_response_sendable(column: str) -> None:
    row = {"col_id": 1, "col_title": "leave policy", "col_body": "leave policy text",
           "col_owner": "hr"}  # fmt: skip
    row[column] = f"leave policy {LONE} x"
    response = await _retriever([row]).retrieve(make_context(), "leave policy")

    assert len(response.results) == 1
    assert "\ufffd" in _wire(response).decode("utf-8")


async def test_a_lone_surrogate_in_a_record_key_costs_only_that_reference() -> None:
    rows = [
        {"col_id": f"k{LONE}", "col_title": "leave policy one", "col_body": "leave policy"},
        {"col_id": "k2", "col_title": "leave policy two", "col_body": "leave policy"},
    ]
    try:
        response = await _retriever(rows).retrieve(make_context(), "leave policy")
    except EsraError as exc:  # pragma: no cover - the failure this test guards against
        pytest.fail(f"the search failed: {exc.code}")

    refs = {r.title: r.document_ref for r in response.results}
    assert refs["leave policy one"] is None
    assert refs["leave policy two"] is not None
