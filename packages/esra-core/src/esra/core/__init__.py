"""esra-core: the retrieval pipeline, validator and ports, with no I/O of its own.

The names listed in ``__all__`` are the public surface an embedder builds on: the
``Retriever`` and the fetch service, the request and response types, the configuration
model, the ports an adapter implements, the codes and exceptions, and operator explain.
Everything else under ``esra.core`` is implementation and may move between releases; the
in-memory fakes live in ``esra.core.testing``. ``tests/typing/public_api.py`` uses only
these names under mypy strict, so a change to the surface shows up as a type error.

Names are imported when first used (PEP 562), so ``import esra.core`` stays cheap for a
command that needs one corner of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from esra.core._lazy_surface import lazy_attributes

__version__ = "0.1.0"

if TYPE_CHECKING:
    from esra.core._clock import SystemClock
    from esra.core._context import CallerIdentity, ClaimValue, InvocationContext
    from esra.core._explain import (
        Decision,
        ExplainedQuery,
        Explanation,
        PlannedSearch,
        RankedResult,
        StageTime,
        ValidationDecision,
    )
    from esra.core._fetch.result import FetchedDocument
    from esra.core._fetch.service import DocumentFetcher
    from esra.core._fetch.tokens import Keyring
    from esra.core._pipeline.execution import Executor
    from esra.core._pipeline.values import ValidatedQuery
    from esra.core._query import PlannedFilter, ResultRow, Strategy
    from esra.core._request import RetrievalRequest
    from esra.core._response import (
        Answer,
        ResponseStatus,
        ResponseWarning,
        ResultItem,
        RetrievalResponse,
    )
    from esra.core._retriever import Retriever
    from esra.core._static_config import StaticConfigRepository
    from esra.core.codes import (
        AuditEvent,
        ErrorCode,
        ProviderErrorCode,
        RejectionReason,
        WarningCode,
    )
    from esra.core.config import (
        AccessPolicy,
        BindingMode,
        Capability,
        CapabilityLimits,
        ConfigSnapshot,
        Exposure,
        FieldSpec,
        FieldType,
        Mapping,
        Operator,
        RecordFilter,
        Source,
        SourceBinding,
        SourceHealth,
        dump_snapshot,
        load_snapshot,
    )
    from esra.core.exceptions import (
        ConfigurationError,
        DocumentNotFoundError,
        EsraError,
        ExposureNotFoundError,
        FetchQuotaExceededError,
        InvalidRequestError,
        NoSourcesAvailableError,
        ProviderError,
        QuotaUnavailableError,
        SourceUnavailableError,
    )
    from esra.core.ports import (
        AuditSink,
        BreakerBroadcast,
        BreakerOpening,
        Cache,
        Clock,
        ConfigRepository,
        HostAllowlist,
        LanguageModel,
        ProviderCapabilities,
        QuotaStore,
        RenderedStatement,
        SearchProvider,
        SecretStore,
        StatementRenderer,
        TextIndexKind,
        WritableSecretStore,
    )

# Each public name, and the module that defines it.
_PUBLIC: dict[str, str] = {
    **dict.fromkeys(["SystemClock"], "esra.core._clock"),
    **dict.fromkeys(
        ["AuditEvent", "ErrorCode", "ProviderErrorCode", "RejectionReason", "WarningCode"],
        "esra.core.codes",
    ),
    **dict.fromkeys(
        [
            "AccessPolicy",
            "BindingMode",
            "Capability",
            "CapabilityLimits",
            "ConfigSnapshot",
            "Exposure",
            "FieldSpec",
            "FieldType",
            "Mapping",
            "Operator",
            "RecordFilter",
            "Source",
            "SourceBinding",
            "SourceHealth",
            "dump_snapshot",
            "load_snapshot",
        ],
        "esra.core.config",
    ),
    **dict.fromkeys(["CallerIdentity", "ClaimValue", "InvocationContext"], "esra.core._context"),
    **dict.fromkeys(
        [
            "ConfigurationError",
            "DocumentNotFoundError",
            "EsraError",
            "ExposureNotFoundError",
            "FetchQuotaExceededError",
            "InvalidRequestError",
            "NoSourcesAvailableError",
            "ProviderError",
            "QuotaUnavailableError",
            "SourceUnavailableError",
        ],
        "esra.core.exceptions",
    ),
    **dict.fromkeys(
        [
            "Decision",
            "ExplainedQuery",
            "Explanation",
            "PlannedSearch",
            "RankedResult",
            "StageTime",
            "ValidationDecision",
        ],
        "esra.core._explain",
    ),
    "FetchedDocument": "esra.core._fetch.result",
    "DocumentFetcher": "esra.core._fetch.service",
    "Keyring": "esra.core._fetch.tokens",
    "Executor": "esra.core._pipeline.execution",
    **dict.fromkeys(
        [
            "AuditSink",
            "BreakerBroadcast",
            "BreakerOpening",
            "Cache",
            "Clock",
            "ConfigRepository",
            "HostAllowlist",
            "LanguageModel",
            "ProviderCapabilities",
            "QuotaStore",
            "RenderedStatement",
            "SearchProvider",
            "SecretStore",
            "StatementRenderer",
            "TextIndexKind",
            "WritableSecretStore",
        ],
        "esra.core.ports",
    ),
    **dict.fromkeys(["PlannedFilter", "ResultRow", "Strategy"], "esra.core._query"),
    **dict.fromkeys(
        ["Answer", "ResponseStatus", "ResponseWarning", "ResultItem", "RetrievalResponse"],
        "esra.core._response",
    ),
    "RetrievalRequest": "esra.core._request",
    "Retriever": "esra.core._retriever",
    "StaticConfigRepository": "esra.core._static_config",
    # The PEP 562 helper this surface is built with, for adapters' surfaces to use too.
    "lazy_attributes": "esra.core._lazy_surface",
    "ValidatedQuery": "esra.core._pipeline.values",
}

__all__ = [  # noqa: RUF022 - grouped as _PUBLIC is, by where each name lives
    "__version__",
    "SystemClock",
    "AuditEvent",
    "ErrorCode",
    "ProviderErrorCode",
    "RejectionReason",
    "WarningCode",
    "AccessPolicy",
    "BindingMode",
    "Capability",
    "CapabilityLimits",
    "ConfigSnapshot",
    "Exposure",
    "FieldSpec",
    "FieldType",
    "Mapping",
    "Operator",
    "RecordFilter",
    "Source",
    "SourceBinding",
    "SourceHealth",
    "dump_snapshot",
    "load_snapshot",
    "CallerIdentity",
    "ClaimValue",
    "InvocationContext",
    "ConfigurationError",
    "DocumentNotFoundError",
    "EsraError",
    "ExposureNotFoundError",
    "FetchQuotaExceededError",
    "InvalidRequestError",
    "NoSourcesAvailableError",
    "ProviderError",
    "QuotaUnavailableError",
    "SourceUnavailableError",
    "Decision",
    "ExplainedQuery",
    "Explanation",
    "PlannedSearch",
    "RankedResult",
    "StageTime",
    "ValidationDecision",
    "FetchedDocument",
    "DocumentFetcher",
    "Keyring",
    "Executor",
    "AuditSink",
    "BreakerBroadcast",
    "BreakerOpening",
    "Cache",
    "Clock",
    "ConfigRepository",
    "HostAllowlist",
    "LanguageModel",
    "ProviderCapabilities",
    "QuotaStore",
    "RenderedStatement",
    "SearchProvider",
    "SecretStore",
    "StatementRenderer",
    "TextIndexKind",
    "PlannedFilter",
    "ResultRow",
    "Strategy",
    "Answer",
    "ResponseStatus",
    "ResponseWarning",
    "ResultItem",
    "RetrievalResponse",
    "RetrievalRequest",
    "Retriever",
    "StaticConfigRepository",
    "ValidatedQuery",
    "WritableSecretStore",
    "lazy_attributes",
]


# Hidden from type checkers (see ``lazy_attributes``).
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_attributes(__name__, _PUBLIC, globals())
