"""esra-mysql: a read-only MySQL 8 / MariaDB 10.6+ FULLTEXT search provider."""

from esra.mysql._fulltext import MatchAgainstFullText, TokenRules
from esra.mysql._index import (
    create_fulltext_index,
    fulltext_index_columns,
    fulltext_index_statement,
)
from esra.mysql._provider import SCHEMES, TEMPLATE_OPTIONS, MySqlProvider
from esra.mysql._server import ServerFlavor, ServerInfo, detect_server

__all__ = [
    "SCHEMES",
    "TEMPLATE_OPTIONS",
    "MatchAgainstFullText",
    "MySqlProvider",
    "ServerFlavor",
    "ServerInfo",
    "TokenRules",
    "__version__",
    "create_fulltext_index",
    "detect_server",
    "fulltext_index_columns",
    "fulltext_index_statement",
]

__version__ = "0.1.0"
