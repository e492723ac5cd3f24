"""What a tool call returns: the core's results as MCP structured content, or a classified error.

Structured content follows ``SEARCH_OUTPUT_SCHEMA`` / ``FETCH_OUTPUT_SCHEMA``; the same JSON is
also returned as text for clients that do not read structured content. An error is
``is_error`` with the text ``CODE: message``: the code is from the core's closed set and the
message is the core's fixed, safe text — never a stack trace, never driver text.
"""

from __future__ import annotations

import json
from typing import Any

from mcp.types import CallToolResult, TextContent

from esra.core import FetchedDocument, ResultItem, RetrievalResponse
from esra.core.exceptions import EsraError

__all__ = ["error_result", "fetch_output", "search_output", "success_result"]


def _result(item: ResultItem, rank: int) -> dict[str, Any]:
    return {
        "title": item.title,
        "fragments": [item.fragment] if item.fragment else [],
        "fields": dict(item.fields),
        "source": item.source,
        "provenance": {"resultId": item.result_id, "rank": rank, "score": item.score},
        "documentRef": item.document_ref,
    }


def search_output(response: RetrievalResponse) -> dict[str, Any]:
    """The structured content of a search tool's result."""
    output: dict[str, Any] = {
        "status": response.status.value,
        "results": [_result(item, rank) for rank, item in enumerate(response.results, start=1)],
        "warnings": [{"code": w.code.value, "message": w.message} for w in response.warnings],
        "correlationId": response.correlation_id,
    }
    if response.answer is not None:
        output["answer"] = {
            "text": response.answer.text,
            "citations": list(response.answer.citations),
        }
    return output


def fetch_output(document: FetchedDocument) -> dict[str, Any]:
    """The structured content of a fetch tool's result."""
    return {
        "source": document.source,
        "title": document.title,
        "text": document.text,
        "offset": document.offset,
        "totalChars": document.total_chars,
        "hasMore": document.has_more,
        "nextOffset": document.next_offset,
        "fields": dict(document.fields),
        "correlationId": document.correlation_id,
    }


def success_result(output: dict[str, Any]) -> CallToolResult:
    """A successful tool result carrying ``output`` both structured and as JSON text."""
    text = json.dumps(output, ensure_ascii=False)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=output)


def error_result(error: EsraError) -> CallToolResult:
    """A tool error naming the core's code and its safe message."""
    text = f"{error.code.value}: {error}"
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
