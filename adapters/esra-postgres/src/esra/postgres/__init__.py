"""esra-postgres: the PostgreSQL search provider (psycopg 3, pooled, read-only, tsvector)."""

from esra.postgres.connection import ALLOWED_OPTIONS, SCHEMES, connect_kwargs, scrub
from esra.postgres.errors import (
    ExecutionState,
    classify,
    classify_connect_failure,
    classify_sqlstate,
)
from esra.postgres.fulltext import (
    CONFIG_BIND,
    DEFAULT_TEXT_SEARCH_CONFIG,
    TsvectorFullText,
    term_bind_names,
)
from esra.postgres.index import create_text_index, text_index_columns, text_index_statements
from esra.postgres.provider import PostgresProvider, search_path_value
from esra.postgres.quota import DEFAULT_QUOTA_TABLE, PostgresQuotaStore
from esra.postgres.store_init import (
    DEFAULT_SCOPE_CLAIM,
    STORE_AUDIT_EVENT,
    StoreFailure,
    StoreInitialisation,
    StoreInitJob,
    StoreState,
    initialise_store,
    store_mapping,
    store_source,
)
from esra.postgres.store_repository import PostgresDocumentRepository
from esra.postgres.store_schema import (
    DEFAULT_STORE_SCHEMA,
    SEARCHABLE_VIEW,
    STORE_SCHEMA_VERSION,
    StoreSchemaConflictError,
    apply_store_schema,
    store_schema_statements,
    store_schema_version,
)

__version__ = "0.1.0"

__all__ = [
    "ALLOWED_OPTIONS",
    "CONFIG_BIND",
    "DEFAULT_QUOTA_TABLE",
    "DEFAULT_SCOPE_CLAIM",
    "DEFAULT_STORE_SCHEMA",
    "DEFAULT_TEXT_SEARCH_CONFIG",
    "SCHEMES",
    "SEARCHABLE_VIEW",
    "STORE_AUDIT_EVENT",
    "STORE_SCHEMA_VERSION",
    "ExecutionState",
    "PostgresDocumentRepository",
    "PostgresProvider",
    "PostgresQuotaStore",
    "StoreFailure",
    "StoreInitJob",
    "StoreInitialisation",
    "StoreSchemaConflictError",
    "StoreState",
    "TsvectorFullText",
    "__version__",
    "apply_store_schema",
    "classify",
    "classify_connect_failure",
    "classify_sqlstate",
    "connect_kwargs",
    "create_text_index",
    "initialise_store",
    "scrub",
    "search_path_value",
    "store_mapping",
    "store_schema_statements",
    "store_schema_version",
    "store_source",
    "term_bind_names",
    "text_index_columns",
    "text_index_statements",
]
