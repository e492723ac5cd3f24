"""esra-mysql: a read-only MySQL 8 / MariaDB 10.6+ FULLTEXT search provider over PyMySQL."""

from esra.mysql.errors import ERROR_CODES, ExecutionState, classify, error_number
from esra.mysql.fulltext import (
    DEFAULT_STOPWORDS,
    MatchAgainstFullText,
    TokenRules,
    indexable_tokens,
    like_pattern,
    match_string,
)
from esra.mysql.index import (
    create_fulltext_index,
    fulltext_index_columns,
    fulltext_index_statement,
)
from esra.mysql.provider import SCHEMES, TEMPLATE_OPTIONS, MySqlProvider
from esra.mysql.server import ServerFlavor, ServerInfo, detect_server, with_timeout

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_STOPWORDS",
    "ERROR_CODES",
    "SCHEMES",
    "TEMPLATE_OPTIONS",
    "ExecutionState",
    "MatchAgainstFullText",
    "MySqlProvider",
    "ServerFlavor",
    "ServerInfo",
    "TokenRules",
    "__version__",
    "classify",
    "create_fulltext_index",
    "detect_server",
    "error_number",
    "fulltext_index_columns",
    "fulltext_index_statement",
    "indexable_tokens",
    "like_pattern",
    "match_string",
    "with_timeout",
]
