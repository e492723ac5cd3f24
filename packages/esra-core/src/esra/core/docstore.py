"""The internal document store: what a repository adapter and a host build on.

The document model and the ``DocumentRepository`` port's values, the store's
synthetic source and schema constants (defined once for every engine), upload,
ingestion and the worker loop, store lifecycle and settings, the management
service and its search, and the registry that finds installed store kinds.
"""

from esra.core._docstore.document_rows import claimed, findings_json, stored_document, timestamp
from esra.core._docstore.extraction import sandbox_peak_rss_kb
from esra.core._docstore.extras import MissingExtraError, require_document_extra
from esra.core._docstore.filenames import sanitize_filename
from esra.core._docstore.formats import DocumentFormat
from esra.core._docstore.ingestion import (
    IndexedHook,
    IngestionWorker,
    RoundRobin,
    TenantTurn,
    UploadOutcome,
    upload_files,
)
from esra.core._docstore.lifecycle import (
    StoreInitialisationError,
    StoreLifecycle,
    StoreNotReadyError,
    StoreState,
    StoreStateTable,
    StoreStatus,
)
from esra.core._docstore.management import (
    DocumentRow,
    DocumentStoreService,
    Operator,
    StoreOverview,
    StoreSearchPage,
)
from esra.core._docstore.model import (
    Claim,
    DocumentState,
    IndexedContent,
    StoredDocument,
    StoredSegment,
    StoreSettings,
)
from esra.core._docstore.ownership import UPLOADED, DocumentOwner, DocumentReadOnlyError
from esra.core._docstore.queue_gauges import read_queue
from esra.core._docstore.queue_stats import QueueStats
from esra.core._docstore.ready_stores import ReadyStoresConfig, TenantStoreSource
from esra.core._docstore.refusals import REMEDIES, Breach, DocumentRefusedError, remedy_for
from esra.core._docstore.repository import DocumentRepository
from esra.core._docstore.sandbox import SandboxLimits
from esra.core._docstore.scanner import Finding, ScanPolicy, scan_text
from esra.core._docstore.search import (
    DEFAULT_SEARCH_LIMIT,
    MAX_SEARCH_LIMIT,
    DocumentCursor,
    DocumentPage,
    DocumentSearch,
    DocumentSearchError,
)
from esra.core._docstore.store_configuration import (
    MAX_ATTEMPTS_CEILING,
    MAX_BATCH_CEILING,
    ConfigurableSettings,
    StoreConfiguration,
    StoreConfigurationService,
    StoreSettingsConflictError,
    StoreSettingsError,
)
from esra.core._docstore.store_registry import (
    DocumentStoreFactory,
    DocumentStoreRegistry,
    OpenedStore,
    StoreRequest,
    installed_store_kinds,
)
from esra.core._docstore.store_schema import SEARCHABLE_VIEW, STORE_SCHEMA_VERSION
from esra.core._docstore.store_source import (
    DEFAULT_SCOPE_CLAIM,
    StoreMetadata,
    check_scope_claim,
    store_isolation_problem,
    store_mapping,
    store_source,
)
from esra.core._docstore.upload import AcceptedUpload, UploadLimits
from esra.core._docstore.worker_loop import TurnTotals, run_turns
from esra.core._docstore.zipguard import ZipLimits

__all__ = [
    "DEFAULT_SCOPE_CLAIM",
    "DEFAULT_SEARCH_LIMIT",
    "MAX_ATTEMPTS_CEILING",
    "MAX_BATCH_CEILING",
    "MAX_SEARCH_LIMIT",
    "REMEDIES",
    "SEARCHABLE_VIEW",
    "STORE_SCHEMA_VERSION",
    "UPLOADED",
    "AcceptedUpload",
    "Breach",
    "Claim",
    "ConfigurableSettings",
    "DocumentCursor",
    "DocumentFormat",
    "DocumentOwner",
    "DocumentPage",
    "DocumentReadOnlyError",
    "DocumentRefusedError",
    "DocumentRepository",
    "DocumentRow",
    "DocumentSearch",
    "DocumentSearchError",
    "DocumentState",
    "DocumentStoreFactory",
    "DocumentStoreRegistry",
    "DocumentStoreService",
    "Finding",
    "IndexedContent",
    "IndexedHook",
    "IngestionWorker",
    "MissingExtraError",
    "OpenedStore",
    "Operator",
    "QueueStats",
    "ReadyStoresConfig",
    "RoundRobin",
    "SandboxLimits",
    "ScanPolicy",
    "StoreConfiguration",
    "StoreConfigurationService",
    "StoreInitialisationError",
    "StoreLifecycle",
    "StoreMetadata",
    "StoreNotReadyError",
    "StoreOverview",
    "StoreRequest",
    "StoreSearchPage",
    "StoreSettings",
    "StoreSettingsConflictError",
    "StoreSettingsError",
    "StoreState",
    "StoreStateTable",
    "StoreStatus",
    "StoredDocument",
    "StoredSegment",
    "TenantStoreSource",
    "TenantTurn",
    "TurnTotals",
    "UploadLimits",
    "UploadOutcome",
    "ZipLimits",
    "check_scope_claim",
    "claimed",
    "findings_json",
    "installed_store_kinds",
    "read_queue",
    "remedy_for",
    "require_document_extra",
    "run_turns",
    "sandbox_peak_rss_kb",
    "sanitize_filename",
    "scan_text",
    "store_isolation_problem",
    "store_mapping",
    "store_source",
    "stored_document",
    "timestamp",
    "upload_files",
]


def __getattr__(name: str) -> object:
    """``PdfLimits``, the former name of ``SandboxLimits`` (it bounds DOCX parsing too):
    still importable, with a ``DeprecationWarning``."""
    if name == "PdfLimits":
        import warnings  # noqa: PLC0415 - only a deprecated name needs it

        warnings.warn(
            "esra.core.docstore.PdfLimits is deprecated: use SandboxLimits, which bounds the "
            "sandbox child of every PDF and DOCX",
            DeprecationWarning,
            stacklevel=2,
        )
        return SandboxLimits
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
