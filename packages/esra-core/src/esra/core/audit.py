"""Audit records and the sinks, readers and review built on them.

What an audit adapter implements against (``AuditBackend`` behind a
``BatchingAuditSink``), the record and its JSON codec, the reader and query
types of audit review, and the sinks that need no server (JSON lines, logging).
"""

from esra.core._audit.batching import (
    AuditBackend,
    AuditUnavailableError,
    BatchingAuditSink,
    deferred_audit_waits,
)
from esra.core._audit.codec import (
    audit_text,
    dimensions_from_json,
    dimensions_json,
    record_document,
    record_from_document,
)
from esra.core._audit.held_rows import SET_ASIDE_PREFIX, HeldRow, read_held_row
from esra.core._audit.jsonl import JsonLinesAuditLog
from esra.core._audit.logging_sink import LoggingAuditSink
from esra.core._audit.query import (
    DEFAULT_AUDIT_LIMIT,
    AuditCursor,
    AuditPage,
    AuditQuery,
    AuditQueryError,
    AuditReader,
    audit_subject,
    page_of,
)
from esra.core._audit.record import AuditDimension, AuditRecord
from esra.core._audit.review import AUDIT_READ_ROLES, AuditReview
from esra.core._audit.tracing import TraceLinkedAuditSink

__all__ = [
    "AUDIT_READ_ROLES",
    "DEFAULT_AUDIT_LIMIT",
    "SET_ASIDE_PREFIX",
    "AuditBackend",
    "AuditCursor",
    "AuditDimension",
    "AuditPage",
    "AuditQuery",
    "AuditQueryError",
    "AuditReader",
    "AuditRecord",
    "AuditReview",
    "AuditUnavailableError",
    "BatchingAuditSink",
    "HeldRow",
    "JsonLinesAuditLog",
    "LoggingAuditSink",
    "TraceLinkedAuditSink",
    "audit_subject",
    "audit_text",
    "deferred_audit_waits",
    "dimensions_from_json",
    "dimensions_json",
    "page_of",
    "read_held_row",
    "record_document",
    "record_from_document",
]
