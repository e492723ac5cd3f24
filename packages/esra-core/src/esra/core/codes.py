"""The closed sets of codes ESRA emits: provider errors, warnings, errors, rejections, audit events.

Nothing outside these sets ever leaves the core: an unclassified failure becomes
``ErrorCode.ESRA_INTERNAL`` and its detail goes to the log only.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "RETRYABLE_PROVIDER_ERRORS",
    "AuditEvent",
    "DocumentRefusal",
    "ErrorCode",
    "ProviderErrorCode",
    "RejectionReason",
    "WarningCode",
]


class ProviderErrorCode(StrEnum):
    """The sixteen classifications a provider error is translated into before leaving it."""

    TIMEOUT = "TIMEOUT"
    CONNECTION_REFUSED = "CONNECTION_REFUSED"
    AUTH_FAILED = "AUTH_FAILED"
    RELATION_NOT_FOUND = "RELATION_NOT_FOUND"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    COLUMN_NOT_INDEXED = "COLUMN_NOT_INDEXED"
    TEXT_INDEX_UNAVAILABLE = "TEXT_INDEX_UNAVAILABLE"
    SYNTAX_ERROR = "SYNTAX_ERROR"
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"
    CANCELLED = "CANCELLED"
    SNAPSHOT_ISOLATION_UNAVAILABLE = "SNAPSHOT_ISOLATION_UNAVAILABLE"
    HOST_NOT_ALLOWED = "HOST_NOT_ALLOWED"
    SECRET_UNRESOLVED = "SECRET_UNRESOLVED"
    CONNECTION_TEMPLATE_INVALID = "CONNECTION_TEMPLATE_INVALID"
    UNKNOWN = "UNKNOWN"
    CIRCUIT_OPEN = "CIRCUIT_OPEN"


# CIRCUIT_OPEN is deliberately absent: the breaker has already made the retry decision.
RETRYABLE_PROVIDER_ERRORS: frozenset[ProviderErrorCode] = frozenset(
    {
        ProviderErrorCode.CONNECTION_REFUSED,
        ProviderErrorCode.RESOURCE_EXHAUSTED,
        ProviderErrorCode.TIMEOUT,
    }
)


class WarningCode(StrEnum):
    """Warnings attached to a degraded response; each says why the answer is partial."""

    ESRA_SELECTION_FALLBACK = "ESRA_SELECTION_FALLBACK"
    ESRA_PLANNING_FALLBACK = "ESRA_PLANNING_FALLBACK"
    ESRA_PLAN_REJECTED = "ESRA_PLAN_REJECTED"
    ESRA_RERANK_FALLBACK = "ESRA_RERANK_FALLBACK"
    ESRA_SOURCE_FAILED = "ESRA_SOURCE_FAILED"
    # A mandatory or policy-forced source was not searched: its health check found it down.
    ESRA_SOURCE_UNAVAILABLE = "ESRA_SOURCE_UNAVAILABLE"
    ESRA_SOURCE_DROPPED_MISSING_CLAIM = "ESRA_SOURCE_DROPPED_MISSING_CLAIM"
    ESRA_RESPONSE_TRUNCATED = "ESRA_RESPONSE_TRUNCATED"
    ESRA_INVOCATION_DEADLINE = "ESRA_INVOCATION_DEADLINE"
    ESRA_ANSWER_WITHHELD = "ESRA_ANSWER_WITHHELD"
    # A source was not searched because it cannot apply every filter the caller asked for.
    ESRA_CALLER_FILTER_UNSUPPORTED = "ESRA_CALLER_FILTER_UNSUPPORTED"


class ErrorCode(StrEnum):
    """Errors that fail a whole invocation."""

    ESRA_NO_SOURCES_AVAILABLE = "ESRA_NO_SOURCES_AVAILABLE"
    ESRA_EXPOSURE_NOT_FOUND = "ESRA_EXPOSURE_NOT_FOUND"
    ESRA_INVALID_REQUEST = "ESRA_INVALID_REQUEST"
    ESRA_CONFIGURATION_INVALID = "ESRA_CONFIGURATION_INVALID"
    ESRA_DOCUMENT_NOT_FOUND = "ESRA_DOCUMENT_NOT_FOUND"
    ESRA_FETCH_QUOTA_EXCEEDED = "ESRA_FETCH_QUOTA_EXCEEDED"
    # The quota store could not answer: governance fails closed, so the fetch is refused.
    ESRA_QUOTA_UNAVAILABLE = "ESRA_QUOTA_UNAVAILABLE"
    ESRA_SOURCE_UNAVAILABLE = "ESRA_SOURCE_UNAVAILABLE"
    # A configuration write named a version that is no longer the current one.
    ESRA_CONFIG_CONFLICT = "ESRA_CONFIG_CONFLICT"
    # A management action on a connector-owned store document: its connector owns changes.
    ESRA_DOCUMENT_READ_ONLY = "ESRA_DOCUMENT_READ_ONLY"
    ESRA_INTERNAL = "ESRA_INTERNAL"


class RejectionReason(StrEnum):
    """Why the validator dropped a planned query (audited with ``esra.plan.rejected``)."""

    MAPPING_NOT_IN_SCOPE = "MAPPING_NOT_IN_SCOPE"
    UNKNOWN_FIELD = "UNKNOWN_FIELD"
    FIELD_NOT_RETURNABLE = "FIELD_NOT_RETURNABLE"
    FIELD_RESTRICTED = "FIELD_RESTRICTED"
    FIELD_NOT_FILTERABLE = "FIELD_NOT_FILTERABLE"
    OPERATOR_NOT_PERMITTED = "OPERATOR_NOT_PERMITTED"
    FILTER_VALUE_INVALID = "FILTER_VALUE_INVALID"
    LIMIT_OUT_OF_POLICY = "LIMIT_OUT_OF_POLICY"
    QUERY_CAP_EXCEEDED = "QUERY_CAP_EXCEEDED"
    STRATEGY_UNSUPPORTED = "STRATEGY_UNSUPPORTED"
    UNSAFE_CONTENT = "UNSAFE_CONTENT"
    TERM_LIMIT_EXCEEDED = "TERM_LIMIT_EXCEEDED"
    EMPTY_QUERY = "EMPTY_QUERY"


class AuditEvent(StrEnum):
    """Audit event names. Every record carries the tenant, failures and denials included."""

    SOURCES_RESOLVE = "esra.sources.resolve"
    SOURCES_SELECT = "esra.sources.select"
    LLM_UNKNOWN_SOURCE_REJECTED = "esra.llm.unknown_source_rejected"
    LLM_UNKNOWN_RESULT_REJECTED = "esra.llm.unknown_result_rejected"
    PLAN_REJECTED = "esra.plan.rejected"
    SOURCE_DROPPED = "esra.source.dropped"
    QUERY_FAILED = "esra.query.failed"
    ANSWER_COMPOSE = "esra.answer.compose"
    # The host's record of one tool call (tenant, client app, tool, outcome), written after
    # authorization and before the pipeline runs; denials are recorded too.
    INVOKE = "esra.invoke"
    RETRIEVE = "esra.retrieve"
    # An operator's explain of one invocation (the invocation's own records are marked).
    EXPLAIN = "esra.explain"
    FETCH = "esra.fetch"
    STORE_ENABLE = "esra.store.enable"
    STORE_INITIALISE = "esra.store.initialise"
    STORE_CONFIGURE = "esra.store.configure"
    DOCUMENT_UPLOAD = "esra.document.upload"
    DOCUMENT_RELEASE = "esra.document.release"
    DOCUMENT_REINDEX = "esra.document.reindex"
    DOCUMENT_DELETE = "esra.document.delete"
    DOCUMENT_DOWNLOAD = "esra.document.download"
    ADMIN_SECRET_WRITE = "esra.admin.secret.write"
    ADMIN_SOURCE_MODEL = "esra.admin.source.model"
    ADMIN_CAPABILITY_DEFINE = "esra.admin.capability.define"
    ADMIN_POLICY_AUTHOR = "esra.admin.policy.author"
    ADMIN_EXPOSURE_BIND = "esra.admin.exposure.bind"
    ADMIN_EXPOSURE_PUBLISH = "esra.admin.exposure.publish"
    ADMIN_WORKSPACE_VIEW = "esra.admin.workspace.view"
    ADMIN_AUDIT_READ = "esra.admin.audit.read"
    ADMIN_LOOKUPS_VIEW = "esra.admin.lookups.view"
    # A held audit outbox row this version cannot decode (malformed, the wrong shape), set
    # aside in the outbox so the records behind it are delivered: names the outbox and the
    # row and carries a digest of its stored text, never what it holds.
    AUDIT_OUTBOX_ROW_SET_ASIDE = "esra.audit.outbox_row_set_aside"


class DocumentRefusal(StrEnum):
    """Why the internal document store refused or failed one uploaded document.

    Each code has a remedy an operator can act on (``esra.core.docstore.remedies``).
    """

    EMPTY_DOCUMENT = "EMPTY_DOCUMENT"
    TOO_LARGE = "TOO_LARGE"
    UNSUPPORTED_TYPE = "UNSUPPORTED_TYPE"
    LEGACY_DOC = "LEGACY_DOC"
    MACRO_ENABLED = "MACRO_ENABLED"
    ACTIVE_CONTENT = "ACTIVE_CONTENT"
    TYPE_MISMATCH = "TYPE_MISMATCH"
    PASSWORD_PROTECTED = "PASSWORD_PROTECTED"
    MALFORMED_DOCUMENT = "MALFORMED_DOCUMENT"
    DUPLICATE_DOCUMENT = "DUPLICATE_DOCUMENT"
    INJECTION_SUSPECTED = "INJECTION_SUSPECTED"
    # Extraction ceilings: the text, or the number of segments it splits into, is over the
    # store's bound (a file of a million one-line headings fits the upload limit).
    TEXT_TOO_LONG = "TEXT_TOO_LONG"
    TOO_MANY_SEGMENTS = "TOO_MANY_SEGMENTS"
