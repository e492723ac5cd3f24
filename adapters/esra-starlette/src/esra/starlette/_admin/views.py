"""JSON views of the document store for the admin API (camelCase, like the MCP output).

A document's view carries what the review screen needs — state, failure classification and
remedy, findings, the zero-segment callout and which actions apply — and never its bytes or
text. ``downloadAvailable`` is true only for an operator holding ``ESRA_DATA_MANAGE``. A
connector-owned document is ``readOnly`` (``readOnlyReason`` says why): no release, re-index
or delete is available on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from esra.core.docstore import (
    DocumentRow,
    DocumentState,
    Finding,
    StoredDocument,
    StoreState,
    UploadOutcome,
)
from esra.starlette._uploads import shown_name

__all__ = ["counts_view", "document_view", "finding_view", "outcome_view", "state_view"]


def finding_view(finding: Finding) -> dict[str, Any]:
    """One scanner finding: the rule, its span in the extracted text (or in the title, the
    file name, when ``in_title``), the excerpt and where in the excerpt the matched words are
    (``excerpt_span``, ``null`` for a finding stored before spans were recorded).

    The span lets a reviewer's tool mark the very occurrence the rule matched: finding the
    words in the excerpt again could mark an earlier one, or none where the match read
    through folded or hyphenated text."""
    span = finding.excerpt_span
    return {
        "rule": finding.rule,
        "start": finding.start,
        "end": finding.end,
        "excerpt": finding.excerpt,
        "excerpt_span": list(span) if span is not None else None,
        "in_title": finding.in_title,
    }


def _document(document: StoredDocument) -> dict[str, Any]:
    failure = (
        {
            "reason": document.failure.value,
            "breach": document.failure_breach.value if document.failure_breach else None,
            "remedy": document.remedy,
        }
        if document.failure is not None
        else None
    )
    return {
        "id": document.id,
        "title": document.title,
        "format": document.format.value,
        "size": document.size,
        "sha256": document.sha256,
        "scope": document.scope,
        "state": document.state.value,
        "attempts": document.attempts,
        "revision": document.revision,
        "segmentCount": document.segment_count,
        "createdAt": document.created_at.isoformat(),
        "updatedAt": document.updated_at.isoformat(),
        "failure": failure,
        "findings": [finding_view(f) for f in document.findings],
        "bytesRetained": document.bytes_retained,
        "releasedBy": document.released_by,
        "owner": {"kind": document.owner.kind.value, "connector": document.owner.connector},
        "uploadedBy": document.uploaded_by,
    }


def document_view(row: DocumentRow, *, may_download: bool) -> dict[str, Any]:
    """One document row with the actions that apply to it."""
    return {
        **_document(row.document),
        "zeroSegments": row.zero_segments,
        "releaseAvailable": row.release_available,
        "reindexAvailable": row.reindex_available,
        "reindexUnavailableReason": None
        if row.reindex_available
        else (
            row.read_only_reason
            or (
                "The document is being processed."
                if row.document.bytes_retained
                else "The original bytes were not retained, so there is nothing to re-index from."
            )
        ),
        "downloadAvailable": may_download and row.document.bytes_retained,
        "deleteAvailable": row.delete_available,
        "readOnly": row.read_only_reason is not None,
        "readOnlyReason": row.read_only_reason,
    }


def counts_view(counts: Mapping[DocumentState, int]) -> dict[str, int]:
    """Store-wide counts for every state (the list's filters), and their total."""
    view = {state.value: counts.get(state, 0) for state in DocumentState}
    return {**view, "total": sum(view.values())}


def outcome_view(outcome: UploadOutcome) -> dict[str, Any]:
    """One uploaded file's own outcome: stored (with its document), stored as Failed (with
    its document, the reason, the breach and the remedy), or refused with a remedy.

    ``filename`` is the sanitised name (the stored title), never the submitted one.
    """
    if outcome.stored_as_failed and outcome.document is not None:
        breach = outcome.document.failure_breach
        return {
            "filename": shown_name(outcome),
            "outcome": "failed",
            "documentId": outcome.document.id,
            "title": outcome.document.title,
            "state": outcome.document.state.value,
            "reason": outcome.refusal.value if outcome.refusal else None,
            "breach": breach.value if breach is not None else None,
            "remedy": outcome.remedy,
        }
    if outcome.document is not None:
        return {
            "filename": shown_name(outcome),
            "outcome": "stored",
            "documentId": outcome.document.id,
            "title": outcome.document.title,
            "state": outcome.document.state.value,
        }
    return {
        "filename": shown_name(outcome),
        "outcome": "refused",
        "reason": outcome.refusal.value if outcome.refusal else None,
        "remedy": outcome.remedy,
    }


def state_view(state: StoreState) -> dict[str, Any]:
    """The store's lifecycle state; a failure carries its reason and remedy."""
    return {
        "status": state.status.value,
        "changedAt": state.changed_at.isoformat(),
        "failure": state.failure,
        "remedy": state.remedy,
    }
