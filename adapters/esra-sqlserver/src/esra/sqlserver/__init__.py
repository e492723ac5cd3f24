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
from esra.sqlserver.provider import (
    FULLTEXT_INDEX_SQL,
    HEALTH_PROBE_SQL,
    SCHEMES,
    SqlServerProvider,
    bindable,
    run_fenced,
    sqlserver_dialect,
)
from esra.sqlserver.rpc import (
    MAX_NVARCHAR_UNITS,
    RpcLimitError,
    RpcParameter,
    RpcStatement,
    execute_rpc,
    rpc_statement,
    rpc_text,
)
from esra.sqlserver.session import ROLLBACK_SQL, Isolation, session_sql

__version__ = "0.1.0"

__all__ = [
    "DBLIB_ERROR_CODES",
    "FULLTEXT_INDEX_SQL",
    "HEALTH_PROBE_SQL",
    "MAX_NVARCHAR_UNITS",
    "ROLLBACK_SQL",
    "SCHEMES",
    "SQLSERVER_ERROR_CODES",
    "ExecutionState",
    "Isolation",
    "RpcLimitError",
    "RpcParameter",
    "RpcStatement",
    "SqlServerFullText",
    "SqlServerProvider",
    "__version__",
    "bindable",
    "classify",
    "containstable_phrase",
    "error_numbers",
    "execute_rpc",
    "freetext_string",
    "fulltext_index_statements",
    "rpc_statement",
    "rpc_text",
    "run_fenced",
    "searchable_columns",
    "session_sql",
    "sqlserver_dialect",
]
