"""esra-sql: what every ESRA SQL provider shares: the provider shell and its engine part,
the SQLAlchemy Core statement builder, connection templates, and synchronous drivers run on
pinned threads."""

from esra.sql._binds import utf8_bindable
from esra.sql._builder import (
    KEY_LABEL,
    LIMIT_BIND,
    SCORE_LABEL,
    BuiltStatement,
    ColumnBinding,
    StatementBuilder,
    filter_bind_name,
    predicate_bind_name,
)
from esra.sql._cache import CacheInfo, CompiledStatement, CompiledStatementCache
from esra.sql._connection import (
    RESOLVE_TIMEOUT_S,
    ConnectionTarget,
    ConnectionTemplate,
    SourceConnection,
    check_public_file,
    encode_placeholders,
    resolve_connection,
)
from esra.sql._fulltext import (
    BM25_B,
    BM25_K1,
    FullTextClause,
    FullTextDialect,
    RowConditions,
    SearchTerms,
    TermShape,
    TextTarget,
    combine_pairwise,
    sql_number,
)
from esra.sql._identifiers import schema_identifier
from esra.sql._provider import (
    HEALTH_TIMEOUT_S,
    EngineTraits,
    SqlEngine,
    SqlSearchProvider,
    TimeBudget,
)
from esra.sql._threads import (
    SESSION_ENDING,
    Classifier,
    ConnectionSlot,
    ExecutionState,
    PinnedRunner,
    PoolTimeoutError,
    SlotPool,
)

__all__ = [
    "BM25_B",
    "BM25_K1",
    "HEALTH_TIMEOUT_S",
    "KEY_LABEL",
    "LIMIT_BIND",
    "RESOLVE_TIMEOUT_S",
    "SCORE_LABEL",
    "SESSION_ENDING",
    "BuiltStatement",
    "CacheInfo",
    "Classifier",
    "ColumnBinding",
    "CompiledStatement",
    "CompiledStatementCache",
    "ConnectionSlot",
    "ConnectionTarget",
    "ConnectionTemplate",
    "EngineTraits",
    "ExecutionState",
    "FullTextClause",
    "FullTextDialect",
    "PinnedRunner",
    "PoolTimeoutError",
    "RowConditions",
    "SearchTerms",
    "SlotPool",
    "SourceConnection",
    "SqlEngine",
    "SqlSearchProvider",
    "StatementBuilder",
    "TermShape",
    "TextTarget",
    "TimeBudget",
    "__version__",
    "check_public_file",
    "combine_pairwise",
    "encode_placeholders",
    "filter_bind_name",
    "predicate_bind_name",
    "resolve_connection",
    "schema_identifier",
    "sql_number",
    "utf8_bindable",
]

__version__ = "0.1.0"
