"""Stage 5 — execute validated queries: bounded parallel, resilient per source."""

from __future__ import annotations

import attrs

from esra.core.codes import ProviderErrorCode
from esra.core.query import ResultRow
from esra.core.response import ResponseWarning
from esra.core.validation import ValidatedQuery

__all__ = ["ExecutionOutcome", "QueryResult", "SourceFailure"]


@attrs.frozen
class QueryResult:
    """The rows one validated query returned."""

    query: ValidatedQuery
    rows: tuple[ResultRow, ...]


@attrs.frozen
class SourceFailure:
    """A source whose query failed with a classified provider error."""

    source_id: str
    code: ProviderErrorCode


@attrs.frozen
class ExecutionOutcome:
    """Successful results in query order, plus the classified failures."""

    results: tuple[QueryResult, ...]
    failures: tuple[SourceFailure, ...] = ()
    warnings: tuple[ResponseWarning, ...] = ()
