"""esra-sqlite: the embedded default — an SQLite FTS5 search provider, no server needed."""

from esra.sqlite.connection import ConnectionPool, PoolTimeoutError, open_readonly
from esra.sqlite.errors import ExecutionState, classify
from esra.sqlite.fulltext import Fts5FullText, fts5_match_expression, fts5_string
from esra.sqlite.index import (
    DEFAULT_TOKENIZE,
    create_fts5_index,
    fts5_index_columns,
    fts5_index_statements,
)
from esra.sqlite.provider import SqliteFts5Provider

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_TOKENIZE",
    "ConnectionPool",
    "ExecutionState",
    "Fts5FullText",
    "PoolTimeoutError",
    "SqliteFts5Provider",
    "__version__",
    "classify",
    "create_fts5_index",
    "fts5_index_columns",
    "fts5_index_statements",
    "fts5_match_expression",
    "fts5_string",
    "open_readonly",
]
