"""esra-oracle: the Oracle Text search provider (python-oracledb, thin mode)."""

from esra.oracle.errors import (
    DPY_ERROR_CODES,
    DRG_ERROR_CODES,
    ORA_ERROR_CODES,
    ExecutionState,
    classify,
    error_codes,
)
from esra.oracle.fulltext import OracleTextFullText, oracle_text_expression, oracle_text_term
from esra.oracle.index import searchable_columns, text_index_statements
from esra.oracle.provider import (
    READ_ONLY_SQL,
    SCHEMES,
    OracleTextProvider,
    bind_params,
    bindable,
    current_schema_sql,
    oracle_dialect,
)

__version__ = "0.1.0"

__all__ = [
    "DPY_ERROR_CODES",
    "DRG_ERROR_CODES",
    "ORA_ERROR_CODES",
    "READ_ONLY_SQL",
    "SCHEMES",
    "ExecutionState",
    "OracleTextFullText",
    "OracleTextProvider",
    "__version__",
    "bind_params",
    "bindable",
    "classify",
    "current_schema_sql",
    "error_codes",
    "oracle_dialect",
    "oracle_text_expression",
    "oracle_text_term",
    "searchable_columns",
    "text_index_statements",
]
