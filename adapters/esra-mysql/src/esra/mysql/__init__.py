"""esra-mysql: a read-only MySQL 8 / MariaDB 10.6+ FULLTEXT search provider over PyMySQL."""

from esra.mysql.fulltext import MatchAgainstFullText
from esra.mysql.index import create_fulltext_index, fulltext_index_columns, fulltext_index_statement
from esra.mysql.provider import SCHEMES, TEMPLATE_OPTIONS, MySqlProvider
from esra.mysql.server import ServerFlavor, ServerInfo, detect_server

__version__ = "0.1.0"

__all__ = [
    "SCHEMES",
    "TEMPLATE_OPTIONS",
    "MatchAgainstFullText",
    "MySqlProvider",
    "ServerFlavor",
    "ServerInfo",
    "__version__",
    "create_fulltext_index",
    "detect_server",
    "fulltext_index_columns",
    "fulltext_index_statement",
]
