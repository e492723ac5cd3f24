"""Every statement shape the shared builder renders, for engines whose server never runs here.

``SHAPES`` maps a case name to overrides of ``tests._injection.issue``: the snapshot
strategies, each term kind alone and several of each, every filter operator on every field
type (as a search filter and as a record filter), record-filter templates (AND / OR / NOT /
IS [NOT] NULL / IN and every comparison), document-fetch lookups (plain, multi-part, with a
template) and a schema-qualified mapping. The SQL Server and Oracle parse tests render each
one and hand the text to an independent SQL parser.
"""

from __future__ import annotations

from typing import Any

import attrs

from esra.core._config.mapping import FieldType, Operator
from esra.core._query import ProjectedField, ResolvedFilter, Scalar, Strategy
from esra.core._record_predicate import (
    PredicateAnd,
    PredicateComparison,
    PredicateIsNull,
    PredicateNot,
    PredicateOr,
)
from esra.core.testing.contract import CONTRACT_MAPPING
from tests._snapshots import CASES

__all__ = ["SHAPES"]

# A column per field type, with a value of that type (DATE values are ISO text, as issued).
_TYPED: dict[FieldType, tuple[str, Scalar]] = {
    FieldType.TEXT: ("art_category", "energy"),
    FieldType.INTEGER: ("art_year", 2021),
    FieldType.NUMBER: ("art_rating", 4.5),
    FieldType.BOOLEAN: ("art_flag", True),
    FieldType.DATE: ("art_published", "2022-06-01"),
}


def _values(operator: Operator, value: Scalar) -> tuple[Scalar, ...]:
    return (value, value) if operator is Operator.IN else (value,)


_TEMPLATE = PredicateOr(
    (
        PredicateComparison("art_org", FieldType.TEXT, Operator.EQ, ("acme",)),
        PredicateAnd(
            (
                PredicateComparison("art_category", FieldType.TEXT, Operator.IN, ("a", "b", "c")),
                PredicateNot(
                    PredicateComparison("art_flag", FieldType.BOOLEAN, Operator.EQ, (True,))
                ),
                PredicateIsNull("art_secret"),
                PredicateIsNull("art_title", negated=True),
            )
        ),
    )
)
_EVERY_COMPARISON = PredicateAnd(
    tuple(
        PredicateComparison(column, field_type, operator, _values(operator, value))
        for field_type, (column, value) in _TYPED.items()
        for operator in Operator
    )
)


def _filter_shapes() -> dict[str, dict[str, Any]]:
    shapes: dict[str, dict[str, Any]] = {}
    for field_type, (column, value) in _TYPED.items():
        for operator in Operator:
            flt = ResolvedFilter(column, field_type, operator, _values(operator, value))
            name = f"{field_type.value}_{operator.value}".lower()
            shapes[f"filter_{name}"] = {"optional_terms": ("solar",), "filters": (flt,)}
            shapes[f"record_filter_{name}"] = {
                "optional_terms": ("solar",),
                "record_filters": (flt,),
            }
    return shapes


SHAPES: dict[str, dict[str, Any]] = {
    **{f"strategy_{name}": overrides for name, overrides in CASES.items()},
    "required_only": {"required_terms": ("solar",)},
    "optional_only": {"optional_terms": ("solar",)},
    "phrase_only": {"phrases": ("solar panel",)},
    "excluded_only": {"excluded_terms": ("draft",)},
    "no_terms": {},
    "several_of_each": {
        "required_terms": ("solar", "panel"),
        "optional_terms": ("inverter", "roof", "grid"),
        "excluded_terms": ("budget", "draft"),
        "phrases": ("solar panel", "heat pump"),
    },
    "no_freshness_one_column": {
        "optional_terms": ("solar",),
        "projection": (ProjectedField("title", "art_title"),),
        "freshness": None,
    },
    "recent_by_freshness": {"strategy": Strategy.RECENT, "optional_terms": ("solar",)},
    "no_record_filter": {"optional_terms": ("solar",), "record_filters": ()},
    **_filter_shapes(),
    "template": {"optional_terms": ("solar",), "record_predicate": _TEMPLATE},
    "template_every_comparison": {
        "required_terms": ("solar",),
        "record_predicate": _EVERY_COMPARISON,
    },
    "template_with_filters_and_exclusion": {
        "optional_terms": ("solar",),
        "excluded_terms": ("draft",),
        "filters": (ResolvedFilter("art_year", FieldType.INTEGER, Operator.GTE, (2021,)),),
        "record_predicate": _TEMPLATE,
    },
    "lookup": {"lookup_key": "a07", "row_limit": 1},
    "lookup_multi_part": {
        "lookup_key": "a07",
        "mapping": attrs.evolve(CONTRACT_MAPPING, part_order_column="art_part"),
    },
    "lookup_with_template": {"lookup_key": "a07", "record_predicate": _TEMPLATE},
    "schema_qualified": {
        "required_terms": ("solar",),
        "optional_terms": ("panel",),
        "excluded_terms": ("draft",),
        "mapping": attrs.evolve(CONTRACT_MAPPING, schema="sales"),
    },
    "schema_qualified_lookup": {
        "lookup_key": "a07",
        "mapping": attrs.evolve(CONTRACT_MAPPING, schema="Sales Ops"),
    },
}
