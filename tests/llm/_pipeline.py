"""The real Retriever over in-memory sources, for driving remote model clients end to end.

Source ``s-1`` is mandatory and ``s-2`` optional, so a request exercises all four model
tasks: selection (over ``s-2``), planning, rerank and the answer (both sources permit one).
When the model fails throughout, every stage still has something to fall back on: ``s-1``
is searched from its default templates and the results come back in search-score order.
"""

from __future__ import annotations

import logging

import pytest

from esra.core._audit.record import AuditRecord
from esra.core._response import RetrievalResponse
from esra.core._retriever import Retriever
from esra.core.codes import AuditEvent, WarningCode
from esra.core.config import BindingMode, ResponseMode, SourceBinding
from esra.core.ports import LanguageModel
from esra.core.testing import (
    FakeClock,
    InMemoryAuditSink,
    InMemoryConfigRepository,
    InMemorySearchProvider,
)
from tests.core.factories import make_capability, make_context, make_snapshot, make_source

__all__ = [
    "FALLBACKS",
    "REQUEST",
    "key_free_logs",
    "retrieve",
    "retrieve_record",
    "warning_codes",
]

REQUEST = "annual leave policy"

FALLBACKS = {
    WarningCode.ESRA_SELECTION_FALLBACK,
    WarningCode.ESRA_PLANNING_FALLBACK,
    WarningCode.ESRA_RERANK_FALLBACK,
}
"""The warnings of a model that failed every pipeline stage it was asked in."""

_ROWS = {
    "m-s-1": [
        {
            "col_id": 1,
            "col_title": "Annual leave policy",
            "col_body": "Employees get 28 days leave.",
        },
        {"col_id": 2, "col_title": "Travel policy", "col_body": "Book travel via the desk."},
    ],
    "m-s-2": [
        {"col_id": 10, "col_title": "Leave request form", "col_body": "Request leave early."},
    ],
}


async def retrieve(model: LanguageModel) -> tuple[RetrievalResponse, InMemoryAuditSink]:
    """Run ``REQUEST`` through a fresh Retriever using ``model``; return response and audit."""
    capability = make_capability(
        [SourceBinding("s-1", BindingMode.MANDATORY), SourceBinding("s-2")],
        response_modes=frozenset({ResponseMode.RESULTS, ResponseMode.ANSWER}),
    )
    sources = [make_source("s-1", answer_permitted=True), make_source("s-2", answer_permitted=True)]
    audit = InMemoryAuditSink()
    retriever = Retriever(
        config=InMemoryConfigRepository([make_snapshot(sources, capability=capability)]),
        providers={"s-1": InMemorySearchProvider(_ROWS), "s-2": InMemorySearchProvider(_ROWS)},
        model=model,
        audit=audit,
        clock=FakeClock(),
    )
    return await retriever.retrieve(make_context(), REQUEST), audit


def warning_codes(response: RetrievalResponse) -> set[WarningCode]:
    """Return the set of warning codes on ``response``."""
    return {w.code for w in response.warnings}


def retrieve_record(audit: InMemoryAuditSink) -> AuditRecord:
    """Return the invocation's one ``esra.retrieve`` record."""
    (record,) = audit.events(AuditEvent.RETRIEVE)
    return record


def key_free_logs(caplog: pytest.LogCaptureFixture, secret: str) -> bool:
    """Return whether no captured log line, extra field or traceback contains ``secret``."""
    formatter = logging.Formatter()
    for record in caplog.records:
        # The formatted line with any traceback, and every extra field (stamina logs some).
        text = formatter.format(record) + repr(vars(record))
        if secret in text:
            return False
    return True
