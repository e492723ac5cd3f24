"""esra-sqlite: the embedded default — an SQLite FTS5 search provider and document store."""

from esra.sqlite._audit import SqliteAuditLog
from esra.sqlite._config_store import SqliteConfigStore
from esra.sqlite._connection import open_readonly
from esra.sqlite._docstore import SqliteDocumentRepository
from esra.sqlite._docstore_factory import schema_present
from esra.sqlite._docstore_schema import (
    STORE_SCHEMA_VERSION,
    apply_store_schema,
    store_schema_version,
)
from esra.sqlite._docstore_source import DEFAULT_SCOPE_CLAIM, STORE_PROVIDER_KIND, store_source
from esra.sqlite._fulltext import Fts5FullText
from esra.sqlite._index import (
    DEFAULT_TOKENIZE,
    create_fts5_index,
    fts5_index_columns,
    fts5_index_statements,
)
from esra.sqlite._provider import SqliteFts5Provider
from esra.sqlite._secrets import SqliteSecretTable

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
    "schema_present",
    "store_schema_version",
    "store_source",
]

__version__ = "0.1.0"
