"""Tool output: structured content matches the schemas; errors are classified text.

(topK is the core's now: ``RetrievalRequest.top_k``, tested in tests/core.)"""

from __future__ import annotations

import importlib

from esra.core._fetch.result import FetchedDocument
from esra.core._response import Answer, ResponseStatus, ResultItem, RetrievalResponse
from esra.core.codes import ErrorCode
from esra.core.exceptions import DocumentNotFoundError, EsraError
from esra.starlette._output import error_result, fetch_output, search_output
from esra.starlette._schemas import FETCH_OUTPUT_SCHEMA, SEARCH_OUTPUT_SCHEMA

# The validator the mcp client itself uses; it ships without type hints, hence the import.
_jsonschema = importlib.import_module("jsonschema")


def _response(answer: Answer | None = None) -> RetrievalResponse:
    items = tuple(
        ResultItem(
            result_id=f"r_{n}",
            source="Handbook",
            title=f"Policy {n}",
            fragment=f"text {n}",
            score=1.0 - n / 10,
            fields={"owner": "HR"},
            document_ref=f"ref{n}",
        )
        for n in range(3)
    )
    return RetrievalResponse(
        status=ResponseStatus.COMPLETE,
        results=items,
        warnings=(),
        correlation_id="c-1",
        answer=answer,
    )


def test_structured_outputs_match_their_declared_schemas() -> None:
    """What the tools return validates against the output schemas they advertise."""
    output = search_output(_response(Answer("See [r_0].", ("r_0",))))
    _jsonschema.validate(output, SEARCH_OUTPUT_SCHEMA)
    assert output["answer"] == {"text": "See [r_0].", "citations": ["r_0"]}
    assert output["results"][2]["provenance"] == {"resultId": "r_2", "rank": 3, "score": 0.8}
    document = FetchedDocument(
        source="Handbook",
        title="Policy 0",
        text="abc",
        offset=0,
        total_chars=None,
        has_more=True,
        correlation_id="c-2",
    )
    fetched = fetch_output(document)
    _jsonschema.validate(fetched, FETCH_OUTPUT_SCHEMA)
    assert fetched["nextOffset"] == 3
    assert "answer" not in search_output(_response())


def test_errors_carry_the_code_and_the_fixed_message_only() -> None:
    """A tool error is ``CODE: message``; an unclassified error is ESRA_INTERNAL."""
    result = error_result(DocumentNotFoundError())
    assert result.is_error
    assert result.content[0].type == "text"
    assert result.content[0].text == "ESRA_DOCUMENT_NOT_FOUND: No such document."
    internal = error_result(EsraError())
    assert internal.content[0].type == "text"
    assert internal.content[0].text.startswith(ErrorCode.ESRA_INTERNAL.value + ": ")
