"""One audit record as a JSON document and back, identically (what every durable sink stores).

Dimension values are scalars or tuples of strings; JSON has no tuple, so a list read back is
a tuple again, and ``at`` is ISO-8601 with its offset, so the record read back compares
equal to the one written.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from esra.core._audit.record import AuditDimension, AuditRecord
from esra.core.codes import AuditEvent

__all__ = ["dimensions_from_json", "dimensions_json", "record_document", "record_from_document"]


def dimensions_json(record: AuditRecord) -> str:
    """The record's dimensions as compact JSON text (keys sorted)."""
    return json.dumps(dict(record.dimensions), sort_keys=True, separators=(",", ":"))


def _dimension(value: object) -> AuditDimension:
    if isinstance(value, list):
        return tuple(str(item) for item in value)
    if value is None or isinstance(value, str | int | float | bool):
        return value
    msg = "an audit dimension is a scalar or a list of strings"
    raise ValueError(msg)


def dimensions_from_json(raw: str | Mapping[str, Any]) -> dict[str, AuditDimension]:
    """Dimensions from their JSON text (or an already parsed object, as jsonb arrives)."""
    document = json.loads(raw) if isinstance(raw, str) else raw
    if not isinstance(document, Mapping):
        msg = "audit dimensions are a JSON object"
        raise ValueError(msg)
    return {str(name): _dimension(value) for name, value in document.items()}


def record_document(record: AuditRecord) -> dict[str, Any]:
    """``record`` as a JSON-ready mapping."""
    return {
        "event": record.event.value,
        "tenant_id": record.tenant_id,
        "correlation_id": record.correlation_id,
        "at": record.at.isoformat(),
        "outcome": record.outcome,
        "reason": record.reason,
        "dimensions": dict(record.dimensions),
    }


def record_from_document(document: Mapping[str, Any]) -> AuditRecord:
    """The record ``record_document`` produced.

    Raises:
        ValueError: a field is missing or of the wrong type, or the event is unknown.
        KeyError: a required field is absent.
    """
    reason = document.get("reason")
    at = datetime.fromisoformat(str(document["at"]))
    if at.tzinfo is None:
        msg = "an audit record's time carries its offset"
        raise ValueError(msg)
    return AuditRecord(
        event=AuditEvent(document["event"]),
        tenant_id=str(document["tenant_id"]),
        correlation_id=str(document["correlation_id"]),
        at=at,
        outcome=str(document["outcome"]),
        reason=None if reason is None else str(reason),
        dimensions=dimensions_from_json(document.get("dimensions") or {}),
    )
