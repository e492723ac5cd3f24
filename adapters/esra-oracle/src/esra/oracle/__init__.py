"""esra-oracle: the Oracle Text search provider (python-oracledb, thin mode)."""

from esra.oracle._fulltext import OracleTextFullText
from esra.oracle._index import text_index_statements
from esra.oracle._provider import SCHEMES, OracleTextProvider

__version__ = "0.1.0"

__all__ = [
    "SCHEMES",
    "OracleTextFullText",
    "OracleTextProvider",
    "__version__",
    "text_index_statements",
]
