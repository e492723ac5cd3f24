"""What an invocation returns: results, warnings and, where allowed, a short cited answer.

Results are ranked, allowlisted, masked and size-capped; the answer cites them by result id.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

import attrs

from esra.core.codes import WarningCode

__all__ = ["Answer", "ResponseStatus", "ResponseWarning", "ResultItem", "RetrievalResponse"]


class ResponseStatus(StrEnum):
    """``degraded`` always carries at least one warning explaining why."""

    COMPLETE = "complete"
    DEGRADED = "degraded"


@attrs.frozen
class ResponseWarning:
    """A classified warning. ``message`` is composed from fixed text and authorized names only."""

    code: WarningCode
    message: str


@attrs.frozen
class ResultItem:
    """One returned result. ``result_id`` is opaque and valid for this invocation only.

    ``document_ref`` is set only when the exposure enables fetch: an encrypted, expiring
    reference bound to this caller, tenant and exposure (see ``esra.core.fetch``).
    """

    result_id: str
    source: str
    title: str
    fragment: str
    score: float
    fields: Mapping[str, str] = attrs.field(factory=dict)
    document_ref: str | None = None


@attrs.frozen
class Answer:
    """A short answer composed from the returned results.

    ``citations`` are ``result_id`` values of results in the same response, at least one, each
    from a source that permits answers; any ``[result id]`` in ``text`` is one of them.
    """

    text: str
    citations: tuple[str, ...]


@attrs.frozen
class RetrievalResponse:
    """The response to one invocation.

    ``answer`` is set only when the capability allows the answer response mode, a returned
    result comes from a source that permits answers, and the model's answer cites one of them.
    """

    status: ResponseStatus
    results: tuple[ResultItem, ...]
    warnings: tuple[ResponseWarning, ...]
    correlation_id: str
    answer: Answer | None = None
