"""What a search-provider adapter builds on.

The validated query it executes (only the validator makes one; ``ensure_validated``
refuses anything else), the filter and predicate values inside it, the rows it
returns, and the registry through which an installed adapter is found and opened — with
the identifiers a factory may state its engine cannot hold (``CheckedProviderFactory``),
which publication refuses.
"""

from esra.core._identifier_checks import (
    IdentifierCheck,
    UnholdableIdentifierError,
    mapping_identifiers,
    unencodable_identifier_problem,
)
from esra.core._pipeline.values import ValidatedQuery, ensure_validated
from esra.core._provider_registry import (
    CheckedProviderFactory,
    OpenedProvider,
    ProviderFactory,
    ProviderOptionError,
    ProviderRegistry,
    ProviderRequest,
    close_synchronously,
    installed_identifier_checks,
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
    "CheckedProviderFactory",
    "FilterValue",
    "IdentifierCheck",
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
    "UnholdableIdentifierError",
    "ValidatedQuery",
    "close_synchronously",
    "ensure_validated",
    "installed_identifier_checks",
    "installed_provider_kinds",
    "mapping_identifiers",
    "option_value",
    "predicate_columns",
    "predicate_values",
    "unencodable_identifier_problem",
]
