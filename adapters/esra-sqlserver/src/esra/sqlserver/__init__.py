"""esra-sqlserver: the SQL Server search provider (pymssql, FREETEXTTABLE/CONTAINSTABLE)."""

from esra.sqlserver.errors import (
    DBLIB_ERROR_CODES,
    SQLSERVER_ERROR_CODES,
    ExecutionState,
    classify,
    error_numbers,
)
from esra.sqlserver.fulltext import SqlServerFullText, containstable_phrase, freetext_string
from esra.sqlserver.index import fulltext_index_statements, searchable_columns
from esra.sqlserver.provider import SCHEMES, SqlServerProvider, bindable, sqlserver_dialect
from esra.sqlserver.session import ROLLBACK_SQL, Isolation, session_sql

__version__ = "0.1.0"

__all__ = [
    "DBLIB_ERROR_CODES",
    "ROLLBACK_SQL",
    "SCHEMES",
    "SQLSERVER_ERROR_CODES",
    "ExecutionState",
    "Isolation",
    "SqlServerFullText",
    "SqlServerProvider",
    "__version__",
    "bindable",
    "classify",
    "containstable_phrase",
    "error_numbers",
    "freetext_string",
    "fulltext_index_statements",
    "searchable_columns",
    "session_sql",
    "sqlserver_dialect",
]
