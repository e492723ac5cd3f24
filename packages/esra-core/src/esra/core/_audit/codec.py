"""One audit record as a JSON document and back, identically (what every durable sink stores).

Dimension values are scalars or tuples of strings; JSON has no tuple, so a list read back is
a tuple again, and ``at`` is ISO-8601 with its offset, so the record read back compares
equal to the one written.

Except where JSON (or UTF-8) cannot carry a value at all: a lone surrogate — a token's
``sub`` may hold one, JSON's ``\ud800`` escape survives decoding — becomes U+FFFD, and a NaN
or an infinity the text ``"NaN"``, ``"Infinity"`` or ``"-Infinity"``, both ways. Kept as
given, such a value fails whatever encodes the record next (a response, an outbox row, a
log pipeline), and the record with everything around it is lost to review.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from esra.core._audit.record import AuditDimension, AuditRecord
from esra.core._encodable import encodable
from esra.core.codes import AuditEvent

__all__ = [
    "audit_text",
    "dimensions_from_json",
    "dimensions_json",
    "record_document",
    "record_from_document",
]


def audit_text(text: str) -> str:
    """``text`` as an audit record carries it: each lone surrogate one U+FFFD (same length).

    What a durable sink binds as a text column, so that column and the record's dimensions,
    which the codec makes whole the same way, hold the same text.
    """
    return encodable(text)


def _carried(value: AuditDimension) -> AuditDimension:
    """``value`` as JSON and UTF-8 can carry it (see the module docstring)."""
    if isinstance(value, str):
        return encodable(value)
    if isinstance(value, tuple):
        return tuple(encodable(str(item)) for item in value)
    if isinstance(value, float) and not math.isfinite(value):
        return json.dumps(value)  # the token Python's json would have written bare
    return value


def _dimensions(record: AuditRecord) -> dict[str, AuditDimension]:
    dimensions = record.dimensions
    # Every record is encoded, a few per call, and nearly every one's names and values are
    # ASCII text and finite numbers: checking (inline, no call per value) costs less than
    # rebuilding, which only a record holding something else needs.
    for name, value in dimensions.items():
        if not name.isascii():
            break
        if isinstance(value, str):
            if not value.isascii():
                break
        elif isinstance(value, float):
            if not math.isfinite(value):
                break
        elif isinstance(value, tuple) and not all(item.isascii() for item in value):
            break
    else:
        return dict(dimensions)
    return {encodable(name): _carried(value) for name, value in dimensions.items()}


def dimensions_json(record: AuditRecord) -> str:
    """The record's dimensions as compact JSON text (keys sorted)."""
    return json.dumps(_dimensions(record), sort_keys=True, separators=(",", ":"))


def _dimension(value: object) -> AuditDimension:
    if isinstance(value, list):
        return tuple(encodable(str(item)) for item in value)
    if value is None or isinstance(value, str | int | float | bool):
        # Written before text was made whole, or by another writer.
        return _carried(value)
    msg = "an audit dimension is a scalar or a list of strings"
    raise ValueError(msg)


def dimensions_from_json(raw: str | Mapping[str, Any]) -> dict[str, AuditDimension]:
    """Dimensions from their JSON text (or an already parsed object, as jsonb arrives)."""
    document = json.loads(raw) if isinstance(raw, str) else raw
    if not isinstance(document, Mapping):
        msg = "audit dimensions are a JSON object"
        raise ValueError(msg)
    return {encodable(str(name)): _dimension(value) for name, value in document.items()}


def record_document(record: AuditRecord) -> dict[str, Any]:
    """``record`` as a JSON-ready mapping."""
    return {
        "event": record.event.value,
        "tenant_id": encodable(record.tenant_id),
        "correlation_id": encodable(record.correlation_id),
        "at": record.at.isoformat(),
        "outcome": encodable(record.outcome),
        "reason": None if record.reason is None else encodable(record.reason),
        "dimensions": _dimensions(record),
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
        tenant_id=encodable(str(document["tenant_id"])),
        correlation_id=encodable(str(document["correlation_id"])),
        at=at,
        outcome=encodable(str(document["outcome"])),
        reason=None if reason is None else encodable(str(reason)),
        dimensions=dimensions_from_json(document.get("dimensions") or {}),
    )
