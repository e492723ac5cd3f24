"""Shared helpers for the statement-builder tests: a hostile mapping, a plain full-text fake."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from esra.core._config.mapping import FieldSpec, FieldType, Mapping, Operator
from esra.core._pipeline.values import ValidatedQuery, _issue
from esra.core._query import ProjectedField, ResolvedFilter, Strategy
from esra.sql import FullTextClause, SearchTerms, TermShape, TextTarget

# Every physical identifier is something a careless builder would turn into SQL structure.
HOSTILE_MAPPING = Mapping(
    id="m-hostile",
    tenant_id="t1",
    source_id="s1",
    business_name="Hostile",
    description="Identifiers that must be quoted",
    relation='docs"; DROP TABLE users; --',
    schema='sch"ema',
    record_key="key id",
    title_field="title",
    content_fields=("body",),
    fields=(
        FieldSpec("title", 'ti"tle', is_searchable=True, is_returnable=True),
        FieldSpec("body", "body) OR 1=1 --", is_searchable=True, is_returnable=True),
        FieldSpec(
            "category", "Category", is_filterable=True, is_returnable=True,
            allowed_operators=frozenset(Operator),
        ),
        FieldSpec("org", "org`]", is_filterable=True),
        FieldSpec("published", "published at", FieldType.DATE, is_returnable=True),
    ),
    text_index="docs_fts",
    freshness_field="published",
)  # fmt: skip


class PlainFullText:
    """A minimal ``FullTextDialect``: one ``= :tN`` comparison per term, constant score."""

    name = "plain-test"
    base_columns: tuple[str, ...] = ()

    def clause(self, target: TextTarget, shape: TermShape) -> FullTextClause:
        """OR one equality per positive term over the first searchable column."""
        column = target.searchable[0]
        terms = [column == sa.bindparam(f"t{i}") for i in range(shape.positive)]
        predicate = sa.or_(*terms) if terms else None
        score = sa.literal_column("1.0", sa.Float)
        return FullTextClause(from_clause=target.base, predicate=predicate, score=score)

    def bind_values(self, terms: SearchTerms) -> dict[str, object]:
        """Bind the terms in order required, optional, phrases."""
        values = (*terms.required, *terms.optional, *terms.phrases)
        return {f"t{i}": value for i, value in enumerate(values)}


def issue(mapping: Mapping = HOSTILE_MAPPING, **overrides: Any) -> ValidatedQuery:
    """Issue a ``ValidatedQuery`` directly, bypassing the validator on purpose.

    The builder must be safe for anything that was issued — including values the validator
    would have refused — because a future code path might forget the validator.
    """
    values: dict[str, Any] = {
        "query_id": "s1#1",
        "source_id": mapping.source_id,
        "mapping": mapping,
        "strategy": Strategy.KEYWORD,
        "required_terms": (),
        "optional_terms": ("solar",),
        "excluded_terms": (),
        "phrases": (),
        "filters": (
            ResolvedFilter(
                column="Category", type=FieldType.TEXT, operator=Operator.EQ, values=("news",)
            ),
        ),
        "record_filters": (
            ResolvedFilter(column="org`]", type=FieldType.TEXT, operator=Operator.EQ,
                           values=("acme",)),
        ),
        "projection": (
            ProjectedField("title", 'ti"tle'),
            ProjectedField("body", "body) OR 1=1 --"),
        ),
        "freshness": ProjectedField("published", "published at"),
        "row_limit": 10,
    }  # fmt: skip
    values.update(overrides)
    return _issue(**values)
