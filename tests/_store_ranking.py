"""One tenant's store ranking against another tenant's documents: a known cross-tenant channel.

Each engine's store keeps every tenant's segments in one relation, and the ranking's
statistics (PostgreSQL's ``df`` and ``N`` counted in the statement, FTS5's ``bm25()``) span
all of it. No other tenant's row is ever returned, but the order of a tenant's own results
moves with what other tenants index: a tenant who watches the order of two of its own
documents for a pair of words can tell when one word becomes common elsewhere in the store.

The engines' tests reproduce it with what is here and are expected to fail until the store
keeps statistics per tenant; ``KNOWN_CHANNEL`` is strict, so it fails the suite once that is
fixed and cannot outlive the hole.
"""

from __future__ import annotations

import pytest

from esra.core._config.mapping import FieldType, Mapping, Operator
from esra.core._pipeline.values import ValidatedQuery, _issue
from esra.core._query import ProjectedField, ResolvedFilter, Strategy

__all__ = [
    "ACME",
    "ACME_DOCUMENTS",
    "GLOBEX",
    "GLOBEX_DOCUMENTS",
    "KNOWN_CHANNEL",
    "SCOPE",
    "ranking_query",
]

ACME, GLOBEX, SCOPE = "acme", "globex", "s1"

# Acme's "alpha" is in one document and its "beta" in two, so alpha is the rarer word and
# Acme's alpha document ranks first for "alpha beta" — among Acme's documents alone.
ACME_DOCUMENTS = {
    "acme-alpha": "alpha gamma",
    "acme-beta-1": "beta gamma",
    "acme-beta-2": "beta delta",
    **{f"acme-{n}": "gamma delta epsilon" for n in range(6)},
}
# Thirty documents of another tenant about alpha.
GLOBEX_DOCUMENTS = {f"globex-{n}": "alpha zeta" for n in range(30)}

KNOWN_CHANNEL = pytest.mark.xfail(
    strict=True,
    reason="the store's ranking statistics span every tenant: another tenant's documents "
    "reorder this one's",
)


def ranking_query(mapping: Mapping) -> ValidatedQuery:
    """Acme's search for "alpha beta" over its store mapping, in scope ``SCOPE``."""
    return _issue(
        query_id="document_store#1",
        source_id=mapping.source_id,
        mapping=mapping,
        strategy=Strategy.KEYWORD,
        required_terms=(),
        optional_terms=("alpha", "beta"),
        excluded_terms=(),
        phrases=(),
        filters=(),
        record_filters=(
            ResolvedFilter("tenant_id", FieldType.TEXT, Operator.EQ, (ACME,)),
            ResolvedFilter("scope", FieldType.TEXT, Operator.IN, (SCOPE,)),
        ),
        projection=(ProjectedField("title", "title"),),
        freshness=None,
        row_limit=10,
    )
