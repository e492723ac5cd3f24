"""What a search-provider adapter builds on.

The validated query it executes (only the validator makes one; ``ensure_validated``
refuses anything else), the filter and predicate values inside it, the rows it
returns, and the registry through which an installed adapter is found and opened.
"""

from esra.core._pipeline.values import ValidatedQuery, ensure_validated
from esra.core._provider_registry import (
    OpenedProvider,
    ProviderFactory,
    ProviderOptionError,
    ProviderRegistry,
    ProviderRequest,
    close_synchronously,
    installed_provider_kinds,
    option_value,
)
from esra.core._query import (
    FilterValue,
    PlannedFilter,
    ResolvedFilter,
    ResultRow,
    RowValue,
    Scalar,
    Strategy,
)
from esra.core._record_predicate import (
    PredicateAnd,
    PredicateComparison,
    PredicateIsNull,
    PredicateNot,
    PredicateOr,
    RecordPredicate,
    predicate_columns,
    predicate_values,
)

__all__ = [
    "FilterValue",
    "OpenedProvider",
    "PlannedFilter",
    "PredicateAnd",
    "PredicateComparison",
    "PredicateIsNull",
    "PredicateNot",
    "PredicateOr",
    "ProviderFactory",
    "ProviderOptionError",
    "ProviderRegistry",
    "ProviderRequest",
    "RecordPredicate",
    "ResolvedFilter",
    "ResultRow",
    "RowValue",
    "Scalar",
    "Strategy",
    "ValidatedQuery",
    "close_synchronously",
    "ensure_validated",
    "installed_provider_kinds",
    "option_value",
    "predicate_columns",
    "predicate_values",
]
