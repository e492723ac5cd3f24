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

__version__ = "0.1.0"

__all__ = [
    "ALLOWED_OPTIONS",
    "CONFIG_BIND",
    "DEFAULT_TEXT_SEARCH_CONFIG",
    "SCHEMES",
    "ExecutionState",
    "PostgresProvider",
    "TsvectorFullText",
    "__version__",
    "classify",
    "classify_connect_failure",
    "classify_sqlstate",
    "connect_kwargs",
    "create_text_index",
    "scrub",
    "search_path_value",
    "term_bind_names",
    "text_index_columns",
    "text_index_statements",
]
