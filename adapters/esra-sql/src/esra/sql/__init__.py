"""esra-sql: the SQLAlchemy Core statement builder every ESRA SQL provider shares."""

from esra.sql.builder import (
    KEY_LABEL,
    LIMIT_BIND,
    SCORE_LABEL,
    BuiltStatement,
    ColumnBinding,
    StatementBuilder,
    filter_bind_name,
)
from esra.sql.cache import CacheInfo, CompiledStatement, CompiledStatementCache
from esra.sql.connection import ConnectionTarget, ConnectionTemplate, resolve_connection
from esra.sql.fulltext import (
    FullTextClause,
    FullTextDialect,
    SearchTerms,
    TermShape,
    TextTarget,
)

__version__ = "0.1.0"

__all__ = [
    "KEY_LABEL",
    "LIMIT_BIND",
    "SCORE_LABEL",
    "BuiltStatement",
    "CacheInfo",
    "ColumnBinding",
    "CompiledStatement",
    "CompiledStatementCache",
    "ConnectionTarget",
    "ConnectionTemplate",
    "FullTextClause",
    "FullTextDialect",
    "SearchTerms",
    "StatementBuilder",
    "TermShape",
    "TextTarget",
    "__version__",
    "filter_bind_name",
    "resolve_connection",
]
