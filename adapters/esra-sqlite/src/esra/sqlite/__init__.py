"""esra-sqlite: the embedded default — an SQLite FTS5 search provider and document store."""

from esra.sqlite.audit import SqliteAuditLog
from esra.sqlite.config_store import SqliteConfigStore
from esra.sqlite.connection import open_readonly
from esra.sqlite.docstore import SqliteDocumentRepository
from esra.sqlite.docstore_schema import (
    STORE_SCHEMA_VERSION,
    apply_store_schema,
    store_schema_version,
)
from esra.sqlite.docstore_source import DEFAULT_SCOPE_CLAIM, STORE_PROVIDER_KIND, store_source
from esra.sqlite.fulltext import Fts5FullText
from esra.sqlite.index import (
    DEFAULT_TOKENIZE,
    create_fts5_index,
    fts5_index_columns,
    fts5_index_statements,
)
from esra.sqlite.provider import SqliteFts5Provider
from esra.sqlite.secrets import SqliteSecretTable

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_SCOPE_CLAIM",
    "DEFAULT_TOKENIZE",
    "STORE_PROVIDER_KIND",
    "STORE_SCHEMA_VERSION",
    "Fts5FullText",
    "SqliteAuditLog",
    "SqliteConfigStore",
    "SqliteDocumentRepository",
    "SqliteFts5Provider",
    "SqliteSecretTable",
    "__version__",
    "apply_store_schema",
    "create_fts5_index",
    "fts5_index_columns",
    "fts5_index_statements",
    "open_readonly",
    "store_schema_version",
    "store_source",
]
