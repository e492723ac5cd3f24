"""A store's documents row as the model's ``StoredDocument`` or ``Claim``; findings as JSON.

Every engine's repository selects the same columns, named as ``StoredDocument``'s attributes
(an engine computes ``bytes_retained`` and ``deleted`` in SQL where it stores them otherwise),
so one function reads a row whatever the engine. Only the value types differ: SQLite keeps
timestamps as ISO-8601 text and findings as JSON text, PostgreSQL hands back a ``datetime``
and the decoded ``jsonb``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any, Protocol

from esra.core._docstore.formats import DocumentFormat
from esra.core._docstore.model import Claim, DocumentState, StoredDocument
from esra.core._docstore.ownership import DocumentOwner
from esra.core._docstore.refusals import Breach
from esra.core._docstore.scanner import Finding
from esra.core.codes import DocumentRefusal

__all__ = ["claimed", "findings_from_json", "findings_json", "stored_document", "timestamp"]


class _Row(Protocol):
    def __getitem__(self, column: str) -> Any: ...


def timestamp(value: datetime | str) -> datetime:
    """A stored timestamp: a ``datetime`` as it is, ISO-8601 text parsed."""
    return datetime.fromisoformat(value) if isinstance(value, str) else value


def findings_json(findings: Iterable[Finding]) -> str:
    """The findings as the JSON text a documents row stores."""
    # ``in_title`` only where true and ``excerpt_span`` only where known: a finding without
    # them has the JSON it always had.
    return json.dumps(
        [
            {"rule": f.rule, "start": f.start, "end": f.end, "excerpt": f.excerpt}
            | ({"in_title": True} if f.in_title else {})
            | ({"excerpt_span": list(f.excerpt_span)} if f.excerpt_span is not None else {})
            for f in findings
        ]
    )


def findings_from_json(raw: object) -> tuple[Finding, ...]:
    """The findings a documents row stores: JSON text, or the list an engine decoded."""
    decoded = json.loads(raw) if isinstance(raw, str) else raw
    if not isinstance(decoded, list):
        return ()
    return tuple(
        Finding(
            rule=str(f["rule"]),
            start=int(f["start"]),
            end=int(f["end"]),
            excerpt=str(f["excerpt"]),
            in_title=f.get("in_title") is True,
            excerpt_span=_excerpt_span(f.get("excerpt_span")),
        )
        for f in decoded
    )


def _excerpt_span(raw: object) -> tuple[int, int] | None:
    """A stored ``[start, end]`` pair, or ``None`` (a finding stored before spans were kept)."""
    if isinstance(raw, list) and len(raw) == 2:
        return int(raw[0]), int(raw[1])
    return None


def stored_document(row: _Row) -> StoredDocument:
    """The ``StoredDocument`` a documents row holds (by column name)."""
    failure = row["failure"]
    breach = row["failure_breach"]
    return StoredDocument(
        id=row["id"],
        tenant_id=row["tenant_id"],
        title=row["title"],
        format=DocumentFormat(row["format"]),
        sha256=row["sha256"],
        size=int(row["size"]),
        scope=row["scope"],
        state=DocumentState(row["state"]),
        attempts=int(row["attempts"]),
        created_at=timestamp(row["created_at"]),
        updated_at=timestamp(row["updated_at"]),
        revision=int(row["revision"]),
        segment_count=int(row["segment_count"]),
        failure=DocumentRefusal(failure) if failure else None,
        remedy=row["remedy"],
        findings=findings_from_json(row["findings"]),
        bytes_retained=bool(row["bytes_retained"]),
        deleted=bool(row["deleted"]),
        released_by=row["released_by"],
        owner=DocumentOwner(row["owner_kind"], row["owner_connector"]),
        uploaded_by=row["uploaded_by"],
        failure_breach=Breach(breach) if breach else None,
    )


def claimed(row: _Row, *, tenant_id: str, worker_id: str, lease_until: datetime) -> Claim:
    """The ``Claim`` a claim statement's row hands over (``id``, ``attempts``, ``claim_seq``,
    ``title``, ``format`` and the bytes as ``data``), leased to ``worker_id`` until
    ``lease_until``."""
    return Claim(
        document_id=row["id"],
        tenant_id=tenant_id,
        worker_id=worker_id,
        attempt=int(row["attempts"]),
        title=row["title"],
        format=DocumentFormat(row["format"]),
        data=bytes(row["data"]),
        lease_until=lease_until,
        claim_seq=int(row["claim_seq"]),
    )
