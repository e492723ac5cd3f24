"""Binding a record-filter template to a caller's claims, in the validator and the fake provider."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from esra.core._config.record_filter_template import parse_record_filter_template
from esra.core._pipeline.validation import TENANT_CLAIM
from esra.core._pipeline.values import ValidatedQuery, _issue
from esra.core._query import ResolvedFilter
from esra.core._record_predicate import (
    MAX_CLAIM_VALUES,
    MissingClaimError,
    PredicateAnd,
    PredicateComparison,
    PredicateIsNull,
    PredicateNot,
    PredicateOr,
    RecordPredicate,
    bind_template,
    predicate_columns,
    predicate_shape,
    predicate_values,
)
from esra.core.codes import WarningCode
from esra.core.config import FieldType, Operator, RecordFilter
from esra.core.testing import InMemorySearchProvider
from esra.core.testing.contract import contract_query
from tests._record_templates import CALLERS, MAPPING, ROWS, query_for, visible_keys
from tests.core._validation_fixtures import keyword, make_world, rich_mapping
from tests.core.factories import TENANT, make_mapping

# rich_mapping's fields: status (text), year (integer), amount (number), active (boolean),
# published_on (date), salary (restricted text), dept (text, not returnable).
GUARDED = "dept IN {claim:groups} OR (status = {claim:status} AND NOT active = FALSE)"


def _bind(template: str, claims: dict[str, Any]) -> RecordPredicate:
    mapping = rich_mapping(record_filter_template=template)
    parsed = parse_record_filter_template(template, mapping)
    return bind_template(parsed, mapping, claims)


def _issued(template: str, claims: dict[str, Any], **world: Any) -> ValidatedQuery:
    mapping = rich_mapping(record_filter_template=template)
    (query,) = make_world(m1=mapping, claims=claims, **world).validate([keyword()]).queries
    return query


# --- binding -------------------------------------------------------------------------------


def test_binding_resolves_fields_to_columns_and_placeholders_to_claims() -> None:
    """The bound tree reads physical columns and carries typed claim and literal values."""
    predicate = _bind(GUARDED, {"groups": ("sales", "ops"), "status": "open"})
    assert predicate == PredicateOr(
        (
            PredicateComparison("col_dept", FieldType.TEXT, Operator.IN, ("sales", "ops")),
            PredicateAnd(
                (
                    PredicateComparison("col_status", FieldType.TEXT, Operator.EQ, ("open",)),
                    PredicateNot(
                        PredicateComparison("col_active", FieldType.BOOLEAN, Operator.EQ, (False,))
                    ),
                )
            ),
        )
    )


def test_values_columns_and_shape_walk_depth_first() -> None:
    """``predicate_values`` is the bind order; the shape carries no value at all."""
    predicate = _bind(GUARDED, {"groups": ("sales", "ops"), "status": "open"})
    assert [v for _, v in predicate_values(predicate)] == ["sales", "ops", "open", False]
    assert predicate_columns(predicate) == ("col_dept", "col_status", "col_active")
    shape = predicate_shape(predicate)
    assert "sales" not in repr(shape)
    assert "open" not in repr(shape)


@pytest.mark.parametrize(
    ("template", "claims", "expected"),
    [
        ("year = {claim:y}", {"y": 2021}, 2021),
        ("year = {claim:y}", {"y": "2021"}, 2021),
        ("year = {claim:y}", {"y": "-7"}, -7),
        ("amount > {claim:a}", {"a": "12.5"}, 12.5),
        ("amount > {claim:a}", {"a": 3}, 3),
        ("status = {claim:s}", {"s": 42}, "42"),
        ("active = {claim:b}", {"b": True}, True),
        ("published_on >= {claim:d}", {"d": "20240131"}, "2024-01-31"),
        ("salary = {claim:s}", {"s": "band-3"}, "band-3"),
    ],
)
def test_claims_are_coerced_to_the_field_type(
    template: str, claims: dict[str, Any], expected: object
) -> None:
    """Claims that clearly denote a value of the field's type are bound as that type."""
    predicate = _bind(template, claims)
    assert isinstance(predicate, PredicateComparison)
    assert predicate.values == (expected,)
    assert type(predicate.values[0]) is type(expected)


@pytest.mark.parametrize(
    ("template", "claims"),
    [
        ("status = {claim:s}", {}),
        ("status = {claim:s}", {"other": "x"}),
        ("status = {claim:s}", {"s": ""}),
        ("status = {claim:s}", {"s": ("a", "b")}),
        ("status = {claim:s}", {"s": True}),
        ("status = {claim:s}", {"s": None}),
        ("status = {claim:s}", {"s": 1.5}),
        ("status = {claim:s}", {"s": "\x00open"}),
        ("status = {claim:s}", {"s": "op\u200ben"}),
        ("status = {claim:s}", {"s": "open\u2028"}),
        ("dept IN {claim:g}", {"g": ("ops", "sales\x00")}),
        ("year = {claim:y}", {"y": "20x1"}),
        ("year = {claim:y}", {"y": True}),
        ("year = {claim:y}", {"y": "99999999999999999999"}),
        ("year = {claim:y}", {"y": 2**63}),
        ("amount = {claim:a}", {"a": "1e5"}),
        ("active = {claim:b}", {"b": "true"}),
        ("active = {claim:b}", {"b": 1}),
        ("published_on = {claim:d}", {"d": "yesterday"}),
        ("published_on = {claim:d}", {"d": 20240101}),
        ("dept IN {claim:g}", {"g": ()}),
        ("dept IN {claim:g}", {"g": ("ok", True)}),
        ("dept IN {claim:g}", {"g": ("ok", "")}),
        ("dept IN {claim:g}", {"g": tuple(str(i) for i in range(MAX_CLAIM_VALUES + 1))}),
        ("dept IN ('a', {claim:g})", {"g": ("a", "b")}),
        ("status = 'x' OR status = {claim:s}", {}),
    ],
)
def test_a_missing_empty_or_unfitting_claim_cannot_be_bound(
    template: str, claims: dict[str, Any]
) -> None:
    """Fail closed: no default, no omitted branch — the binding refuses outright."""
    with pytest.raises(MissingClaimError):
        _bind(template, claims)


def test_a_single_valued_claim_is_a_one_element_set() -> None:
    """``IN {claim:g}`` with a plain string claim is ``IN ('that value')``."""
    predicate = _bind("dept IN {claim:g}", {"g": "sales"})
    assert predicate == PredicateComparison("col_dept", FieldType.TEXT, Operator.IN, ("sales",))


def test_null_tests_bind_without_values() -> None:
    """``IS NOT NULL`` needs no claim and carries no value."""
    predicate = _bind("dept IS NOT NULL", {})
    assert predicate == PredicateIsNull("col_dept", negated=True)
    assert predicate_values(predicate) == ()


# --- validation ----------------------------------------------------------------------------


def test_the_issued_query_carries_the_bound_predicate() -> None:
    """The validator binds the template with ``context_claims`` and issues it on the query."""
    query = _issued(GUARDED, {"groups": ("sales",), "status": "open"})
    assert query.record_predicate == _bind(GUARDED, {"groups": ("sales",), "status": "open"})
    assert query.record_filters == ()


def test_without_a_template_the_predicate_is_none() -> None:
    """Mappings without a template issue queries whose ``record_predicate`` is None."""
    (query,) = make_world().validate([keyword()]).queries
    assert query.record_predicate is None


def test_structured_record_filters_and_the_template_both_apply() -> None:
    """They combine with AND: both are issued, neither replaces the other."""
    mapping = rich_mapping(
        record_filters=(RecordFilter(field="dept", claim="dept"),),
        record_filter_template="status = {claim:status}",
    )
    world = make_world(m1=mapping, claims={"dept": "ops", "status": "open"})
    (query,) = world.validate([keyword()]).queries
    assert query.record_filters == (
        ResolvedFilter("col_dept", FieldType.TEXT, Operator.EQ, ("ops",)),
    )
    assert query.record_predicate == PredicateComparison(
        "col_status", FieldType.TEXT, Operator.EQ, ("open",)
    )


@pytest.mark.parametrize(
    "claims",
    [
        {"status": "open"},
        {"groups": (), "status": "open"},
        {"groups": ("sales",), "status": ("open", "closed")},
        {"groups": ("sales",), "status": 1.5},
    ],
    ids=["missing", "empty-tuple", "tuple-for-scalar", "wrong-type"],
)
def test_an_unbindable_template_drops_the_whole_source(claims: dict[str, Any]) -> None:
    """Exactly like a structured record filter: the source goes, with the usual warning."""
    guarded = rich_mapping(record_filter_template=GUARDED)
    plain = make_mapping("m-plain", source_id="s-1")
    world = make_world(m1=guarded, claims=claims, extra_s1_mappings=[plain])
    outcome = world.validate([keyword(), keyword(mapping_id="m-plain"), keyword("s-2")])
    assert [q.source_id for q in outcome.queries] == ["s-2"]
    assert outcome.dropped_sources == ("s-1",)
    assert outcome.rejections == ()
    (warning,) = outcome.warnings
    assert warning.code is WarningCode.ESRA_SOURCE_DROPPED_MISSING_CLAIM
    assert "groups" not in warning.message
    assert "status" not in warning.message
    assert "open" not in warning.message


def test_the_reserved_tenant_claim_comes_from_the_context_only() -> None:
    """A caller's own ``esra.tenant_id`` is ignored; the invocation's tenant is bound."""
    query = _issued("dept = {claim:esra.tenant_id}", {TENANT_CLAIM: "tenant-evil"})
    assert query.record_predicate == PredicateComparison(
        "col_dept", FieldType.TEXT, Operator.EQ, (TENANT,)
    )


def test_shape_depends_on_structure_never_on_values() -> None:
    """Equal structures share a shape whatever the claims; IN sizes change the shape."""
    one = _issued(GUARDED, {"groups": ("a", "b"), "status": "open"})
    two = _issued(GUARDED, {"groups": ("x' OR 1=1", "y"), "status": "closed"})
    three = _issued(GUARDED, {"groups": ("a", "b", "c"), "status": "open"})
    plain = make_world().validate([keyword()]).queries[0]
    assert one.shape == two.shape
    assert one.shape != three.shape
    assert one.shape != plain.shape
    assert "x' OR 1=1" not in repr(two.shape)


# --- the in-memory provider ----------------------------------------------------------------


@pytest.mark.parametrize("caller", CALLERS, ids=lambda c: c.name)
async def test_the_fake_provider_applies_the_template_like_sql(caller: Any) -> None:
    """Three-valued logic included: a NULL under NOT is unknown and the row stays out."""
    provider = InMemorySearchProvider({MAPPING.id: ROWS})
    assert await visible_keys(provider, caller.claims) == caller.expected


async def test_the_fake_provider_evaluates_null_tests_and_or_with_unknowns() -> None:
    """``x OR unknown`` is TRUE when x is; ``IS NULL`` is never unknown."""
    provider = InMemorySearchProvider({MAPPING.id: ROWS})
    for template, expected in [
        ("region IS NULL", {"d7"}),
        ("region IS NOT NULL AND NOT archived = TRUE", {"d1", "d3", "d6"}),
        ("NOT archived = TRUE OR owner = 'alice'", {"d1", "d3", "d4", "d5", "d6", "d7"}),
        ("NOT (archived = TRUE OR region = 'x')", {"d1", "d3", "d6"}),
        ("NOT (archived = TRUE AND region = 'apac')", {"d1", "d2", "d3", "d6", "d7"}),
    ]:
        templated = attrs.evolve(MAPPING, record_filter_template=template)
        query = contract_query(provider, mapping=templated, optional=("report",), claims={})
        rows = await provider.execute(query, timeout_s=1.0)
        assert {r.key for r in rows} == expected, template


async def test_the_fake_provider_refuses_an_empty_boolean_node() -> None:
    """A forged empty AND is an error, never a predicate that admits every row."""
    provider = InMemorySearchProvider({MAPPING.id: ROWS})
    query = query_for(provider, CALLERS[0].claims)
    assert query is not None
    forged = _issue(
        **{name: getattr(query, name) for name in ValidatedQuery.__slots__[1:]}
        | {"record_predicate": PredicateAnd(())}
    )
    with pytest.raises(ValueError, match="at least one operand"):
        await provider.execute(forged, timeout_s=1.0)
