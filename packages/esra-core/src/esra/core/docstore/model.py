"""The document store's records: documents, their states, claims and stored segments."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

import attrs

from esra.core.codes import DocumentRefusal
from esra.core.docstore.formats import DocumentFormat
from esra.core.docstore.scanner import Finding, ScanPolicy

__all__ = [
    "Claim",
    "DocumentState",
    "IndexedContent",
    "StoreSettings",
    "StoredDocument",
    "StoredSegment",
]


class DocumentState(StrEnum):
    """A document's lifecycle. Only INDEXED documents are ever searched or fetched."""

    PENDING = "pending"
    PROCESSING = "processing"
    INDEXED = "indexed"
    QUARANTINED = "quarantined"
    FAILED = "failed"


@attrs.frozen
class StoreSettings:
    """Per-tenant store settings."""

    scan_policy: ScanPolicy = ScanPolicy.QUARANTINE
    retain_bytes: bool = True
    max_attempts: int = 3
    lease_s: float = 120.0
    batch_per_tenant: int = 20


@attrs.frozen
class StoredDocument:
    """A document's metadata as the store keeps it (bytes and text are fetched separately)."""

    id: str
    tenant_id: str
    title: str
    format: DocumentFormat
    sha256: str
    size: int
    scope: str
    state: DocumentState
    attempts: int
    created_at: datetime
    updated_at: datetime
    revision: int = 0
    segment_count: int = 0
    failure: DocumentRefusal | None = None
    remedy: str | None = None
    findings: tuple[Finding, ...] = ()
    bytes_retained: bool = True
    deleted: bool = False
    released_by: str | None = None


@attrs.frozen
class Claim:
    """A worker's lease on one document: ownership is (worker, attempt), fenced on completion."""

    document_id: str
    tenant_id: str
    worker_id: str
    attempt: int
    title: str
    format: DocumentFormat
    data: bytes = attrs.field(repr=False)
    lease_until: datetime


@attrs.frozen
class StoredSegment:
    """One indexed segment: its slice of the document text and what the index sees."""

    ordinal: int
    label: str
    body: str
    indexed: str


@attrs.frozen
class IndexedContent:
    """What a successful extraction hands the repository to store atomically."""

    text: str
    segments: tuple[StoredSegment, ...]
    findings: tuple[Finding, ...]
    state: DocumentState
