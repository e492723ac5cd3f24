"""The document store's records: documents, their states, claims and stored segments."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

import attrs

from esra.core._docstore.formats import DocumentFormat
from esra.core._docstore.ownership import UPLOADED, DocumentOwner
from esra.core._docstore.refusals import Breach
from esra.core._docstore.scanner import Finding, ScanPolicy
from esra.core.codes import DocumentRefusal

__all__ = [
    "MAX_LEASE_S",
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


# The longest lease worth asking for: a day (a lapsed lease is how a dead worker is noticed).
MAX_LEASE_S = 86_400.0


def _positive_lease(_instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not 0 < value <= MAX_LEASE_S:
        msg = f"{attribute.name} must be above 0 and at most {MAX_LEASE_S:g} seconds, not {value!r}"
        raise ValueError(msg)


@attrs.frozen
class StoreSettings:
    """Per-tenant store settings.

    A worker claims one document at a time, under a lease of ``lease_s`` that it renews
    every ``heartbeat_s`` (a third of the lease unless set) while extracting it; a worker that
    dies stops renewing, so its document is reclaimed about ``lease_s`` later.

    Raises:
        ValueError: ``lease_s`` is not above 0 (at most a day), or ``heartbeat_s`` is not
            above 0 and below ``lease_s``.
    """

    scan_policy: ScanPolicy = ScanPolicy.QUARANTINE
    retain_bytes: bool = True
    max_attempts: int = 3
    lease_s: float = attrs.field(default=60.0, validator=_positive_lease)
    batch_per_tenant: int = 20
    heartbeat_s: float | None = attrs.field(default=None)

    @heartbeat_s.validator
    def _heartbeat_within_the_lease(
        self, _attribute: attrs.Attribute[float | None], value: float | None
    ) -> None:
        if value is not None and not 0 < value < self.lease_s:
            msg = f"heartbeat_s must be above 0 and below lease_s ({self.lease_s:g}), not {value!r}"
            raise ValueError(msg)

    @property
    def heartbeat_interval_s(self) -> float:
        """How often a worker renews the lease of the document it is extracting."""
        return self.heartbeat_s if self.heartbeat_s is not None else self.lease_s / 3


@attrs.frozen
class StoredDocument:
    """A document's metadata as the store keeps it (bytes and text are fetched separately).

    ``owner`` says who may change it: an upload (by hand) or a connector (read-only here).
    ``uploaded_by`` is the operator subject that uploaded it (``cli:<user>`` from ``esra
    ingest``; None for a connector's). ``failure_breach`` names the safety limit a Failed
    document broke, when that is why it failed (its ``remedy`` is that breach's).
    ``sha256`` is the content's SHA-256 in hex, and an empty string once ``deleted``: a
    delete erases the hash with the content, as it would confirm what the document said.
    """

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
    owner: DocumentOwner = UPLOADED
    uploaded_by: str | None = None
    failure_breach: Breach | None = None


@attrs.frozen
class Claim:
    """A worker's lease on one document; every write it makes is fenced to it.

    ``claim_seq`` is what fences: the document's claim counter, which each claim increments
    and nothing resets. ``attempt`` cannot fence on its own: a re-index resets it to 0 (spec
    004), and one worker process claims under one ``worker_id``, so a claim that outlived
    its lease from before a re-index can share both with the current claim. A store's claims
    number from 1; the default 0 is only for a claim built by hand, and owns nothing.
    """

    document_id: str
    tenant_id: str
    worker_id: str
    attempt: int
    title: str
    format: DocumentFormat
    data: bytes = attrs.field(repr=False)
    lease_until: datetime
    claim_seq: int = 0


@attrs.frozen
class StoredSegment:
    """One indexed segment: its slice of the document text and what the index sees."""

    ordinal: int
    label: str
    body: str
    indexed: str


@attrs.frozen
class IndexedContent:
    """What a successful extraction hands the repository to store atomically.

    ``retain_bytes`` is the tenant's setting at extraction time: False drops the original
    bytes as the content is stored (a repository opened with ``retain_bytes=False`` drops
    them whatever this says: the host's refusal to keep bytes is not the tenant's to lift).
    """

    text: str
    segments: tuple[StoredSegment, ...]
    findings: tuple[Finding, ...]
    state: DocumentState
    retain_bytes: bool = True
