"""esra-postgres: the PostgreSQL search provider (psycopg 3, pooled, read-only, tsvector)."""

from esra.postgres._audit import PostgresAuditLog, prune_audit_before
from esra.postgres._audit_schema import (
    AUDIT_SCHEMA_VERSION,
    DEFAULT_AUDIT_SCHEMA,
    apply_audit_schema,
    audit_schema_version,
)
from esra.postgres._config_listener import ConfigPublicationListener
from esra.postgres._config_schema import (
    CONFIG_SCHEMA_VERSION,
    DEFAULT_CONFIG_SCHEMA,
    apply_config_schema,
    config_schema_version,
)
from esra.postgres._config_store import PostgresConfigStore
from esra.postgres._connection import (
    ALLOWED_OPTIONS,
    PRIVATE_FILE_OPTIONS,
    PUBLIC_FILE_OPTIONS,
    SCHEMES,
    connect_kwargs,
)
from esra.postgres._fulltext import DEFAULT_TEXT_SEARCH_CONFIG, TsvectorFullText
from esra.postgres._host_role import grant_state_host_role
from esra.postgres._index import create_text_index, text_index_columns, text_index_statements
from esra.postgres._provider import PostgresProvider
from esra.postgres._quota import DEFAULT_QUOTA_TABLE, PostgresQuotaStore
from esra.postgres._secrets import PostgresSecretTable
from esra.postgres._secrets_schema import (
    SECRET_SCHEMA_VERSION,
    apply_secret_schema,
    secret_schema_version,
)
from esra.postgres._store_factory import postgres_store_source
from esra.postgres._store_init import (
    DEFAULT_SCOPE_CLAIM,
    StoreFailure,
    StoreInitialisation,
    StoreInitJob,
    StoreState,
    initialise_store,
    store_mapping,
    store_source,
)
from esra.postgres._store_repository import PostgresDocumentRepository
from esra.postgres._store_schema import (
    DEFAULT_STORE_SCHEMA,
    SEARCHABLE_VIEW,
    STORE_SCHEMA_VERSION,
    StoreSchemaConflictError,
    apply_store_schema,
    store_schema_version,
)

__all__ = [
    "ALLOWED_OPTIONS",
    "AUDIT_SCHEMA_VERSION",
    "CONFIG_SCHEMA_VERSION",
    "DEFAULT_AUDIT_SCHEMA",
    "DEFAULT_CONFIG_SCHEMA",
    "DEFAULT_QUOTA_TABLE",
    "DEFAULT_SCOPE_CLAIM",
    "DEFAULT_STORE_SCHEMA",
    "DEFAULT_TEXT_SEARCH_CONFIG",
    "PRIVATE_FILE_OPTIONS",
    "PUBLIC_FILE_OPTIONS",
    "SCHEMES",
    "SEARCHABLE_VIEW",
    "SECRET_SCHEMA_VERSION",
    "STORE_SCHEMA_VERSION",
    "ConfigPublicationListener",
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
    "apply_audit_schema",
    "apply_config_schema",
    "apply_secret_schema",
    "apply_store_schema",
    "audit_schema_version",
    "config_schema_version",
    "connect_kwargs",
    "create_text_index",
    "grant_state_host_role",
    "initialise_store",
    "postgres_store_source",
    "prune_audit_before",
    "secret_schema_version",
    "store_mapping",
    "store_schema_version",
    "store_source",
    "text_index_columns",
    "text_index_statements",
]

__version__ = "0.1.0"
