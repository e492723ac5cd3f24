"""esra-sqlserver: the SQL Server search provider (pymssql, FREETEXTTABLE/CONTAINSTABLE)."""

from esra.sqlserver._fulltext import SqlServerFullText
from esra.sqlserver._index import fulltext_index_statements
from esra.sqlserver._provider import SCHEMES, SqlServerProvider
from esra.sqlserver._session import Isolation

__version__ = "0.1.0"

__all__ = [
    "SCHEMES",
    "Isolation",
    "SqlServerFullText",
    "SqlServerProvider",
    "__version__",
    "fulltext_index_statements",
]
