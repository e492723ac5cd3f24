"""A caller's store ranking against the words of documents it may not see.

Each engine's store keeps every tenant's segments in one relation, every security scope's
too, and a ranking's statistics are counted over some set of them. If that set reaches past
what the caller may see, no hidden row is ever returned but the order of the caller's own
results moves with their words: a tenant who watches the order of two of its own documents
for a pair of words can tell when one word becomes common in another tenant's documents, or
in its own documents of a scope it lacks.

The engines' tests index the caller's documents beside hidden ones in two stores that differ
only in the hidden documents' words (``HIDDEN_ABOUT_ALPHA`` or ``HIDDEN_ABOUT_OMEGA``, the
same number of rows of the same length) and require the caller's ranking to be the same in
both. PostgreSQL counts its statistics over the rows the caller's record conditions admit;
SQLite reweighs each term's FTS5 ``bm25()`` by the idf of those rows (``esra.sqlite._fulltext``).
"""

from __future__ import annotations

import pytest

from esra.core._config.mapping import FieldType, Mapping, Operator
from esra.core._pipeline.values import ValidatedQuery, _issue
from esra.core._query import ProjectedField, ResolvedFilter, Strategy

__all__ = [
    "ACME",
    "ACME_DOCUMENTS",
    "HIDDEN_ABOUT_ALPHA",
    "HIDDEN_ABOUT_OMEGA",
    "HIDING_PLACES",
    "SCOPE",
    "ranking_query",
]

ACME, SCOPE = "acme", "s1"

# Acme's "alpha" is in one document and its "beta" in two, so alpha is the rarer word and
# Acme's alpha document ranks first for "alpha beta" — among what the caller may see.
ACME_DOCUMENTS = {
    "acme-alpha": "alpha gamma",
    "acme-beta-1": "beta gamma",
    "acme-beta-2": "beta delta",
    **{f"acme-{n}": "gamma delta epsilon" for n in range(6)},
}
# Thirty documents the caller may not see, about alpha or about a word it never searches.
HIDDEN_ABOUT_ALPHA = {f"hidden-{n}": "alpha zeta" for n in range(30)}
HIDDEN_ABOUT_OMEGA = {f"hidden-{n}": "omega zeta" for n in range(30)}

# Where hidden documents live, as (tenant, scope): another tenant's store documents, and
# Acme's own in a scope the caller's claims do not give it.
HIDING_PLACES = pytest.mark.parametrize(
    ("hidden_tenant", "hidden_scope"),
    [("globex", SCOPE), (ACME, "s2")],
    ids=["another-tenant", "another-scope"],
)


def ranking_query(mapping: Mapping) -> ValidatedQuery:
    """Acme's search for "alpha beta" over its store mapping, with scope ``SCOPE`` only."""
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
