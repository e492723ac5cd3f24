"""esra-postgres: the PostgreSQL search provider (psycopg 3, pooled, read-only, tsvector)."""

from esra.postgres.audit import PostgresAuditLog
from esra.postgres.config_store import PostgresConfigStore
from esra.postgres.connection import ALLOWED_OPTIONS, SCHEMES
from esra.postgres.fulltext import DEFAULT_TEXT_SEARCH_CONFIG, TsvectorFullText
from esra.postgres.index import create_text_index, text_index_columns, text_index_statements
from esra.postgres.provider import PostgresProvider
from esra.postgres.quota import DEFAULT_QUOTA_TABLE, PostgresQuotaStore
from esra.postgres.secrets import PostgresSecretTable
from esra.postgres.store_init import (
    DEFAULT_SCOPE_CLAIM,
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
    store_schema_version,
)

__version__ = "0.1.0"

__all__ = [
    "ALLOWED_OPTIONS",
    "DEFAULT_QUOTA_TABLE",
    "DEFAULT_SCOPE_CLAIM",
    "DEFAULT_STORE_SCHEMA",
    "DEFAULT_TEXT_SEARCH_CONFIG",
    "SCHEMES",
    "SEARCHABLE_VIEW",
    "STORE_SCHEMA_VERSION",
    "PostgresAuditLog",
    "PostgresConfigStore",
    "PostgresDocumentRepository",
    "PostgresProvider",
    "PostgresQuotaStore",
    "PostgresSecretTable",
    "StoreFailure",
    "StoreInitJob",
    "StoreInitialisation",
    "StoreSchemaConflictError",
    "StoreState",
    "TsvectorFullText",
    "__version__",
    "apply_store_schema",
    "create_text_index",
    "initialise_store",
    "store_mapping",
    "store_schema_version",
    "store_source",
    "text_index_columns",
    "text_index_statements",
]
