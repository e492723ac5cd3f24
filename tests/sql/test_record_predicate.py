"""Rendering a bound record-filter template: structure in the text, every value a bind."""

from __future__ import annotations

import re
from collections.abc import Mapping as MappingABC
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy.dialects import mssql, mysql, oracle, postgresql, sqlite
from sqlalchemy.engine.interfaces import Dialect

from esra.core._config.mapping import FieldSpec, FieldType, Mapping, Operator
from esra.core._config.record_filter_template import parse_record_filter_template
from esra.core._pipeline.values import ValidatedQuery
from esra.core._record_predicate import (
    PredicateAnd,
    PredicateComparison,
    PredicateIsNull,
    PredicateNot,
    PredicateOr,
    RecordPredicate,
    bind_template,
    predicate_values,
)
from esra.sql import CompiledStatementCache, StatementBuilder, predicate_bind_name
from tests._external import load_sqli_payloads
from tests.sql.conftest import HOSTILE_MAPPING, PlainFullText, issue

TEMPLATE = (
    "region = {claim:region} OR (owner IN {claim:groups} AND NOT archived = TRUE)"
    " OR (published IS NULL AND category <> 'needle-literal')"
)
# Hostile physical names: the template's fields resolve to them, and they must be quoted.
MAPPING: Mapping = attrs.evolve(
    HOSTILE_MAPPING,
    fields=(
        *HOSTILE_MAPPING.fields,
        FieldSpec("region", 'reg"ion; --'),
        FieldSpec("owner", "Owner Col", is_restricted=True),
        FieldSpec("archived", "archived", FieldType.BOOLEAN),
    ),
    record_filter_template=TEMPLATE,
)
PARSED = parse_record_filter_template(TEMPLATE, MAPPING)
BENIGN = {"region": "emea", "groups": ("g1", "g2")}

DIALECTS: dict[str, tuple[Dialect, str]] = {
    "sqlite": (
        sqlite.dialect(paramstyle="named"),
        '(b."reg""ion; --" = :p0 OR b."Owner Col" IN (:p1, :p2) AND b.archived != :p3'
        ' OR b."published at" IS NULL AND b."Category" != :p4)',
    ),
    "postgresql": (
        postgresql.psycopg.dialect(),  # type: ignore[no-untyped-call]
        '(b."reg""ion; --" = %(p0)s OR b."Owner Col" IN (%(p1)s, %(p2)s)'
        ' AND b.archived != %(p3)s OR b."published at" IS NULL AND b."Category" != %(p4)s)',
    ),
    "mysql": (
        mysql.pymysql.dialect(paramstyle="pyformat"),
        '(b.`reg"ion; --` = %(p0)s OR b.`Owner Col` IN (%(p1)s, %(p2)s)'
        " AND b.archived != %(p3)s OR b.`published at` IS NULL AND b.`Category` != %(p4)s)",
    ),
    "mssql": (
        mssql.pymssql.dialect(paramstyle="pyformat"),  # type: ignore[no-untyped-call]
        '(b.[reg"ion; --] = %(p0)s OR b.[Owner Col] IN (%(p1)s, %(p2)s)'
        " AND b.archived != %(p3)s OR b.[published at] IS NULL AND b.[Category] != %(p4)s)",
    ),
    "oracle": (
        oracle.oracledb.dialect(),  # type: ignore[no-untyped-call]
        '(b."reg""ion; --" = :p0 OR b."Owner Col" IN (:p1, :p2) AND b.archived != :p3'
        ' OR b."published at" IS NULL AND b."Category" != :p4)',
    ),
}


def _builder(dialect: Dialect | None = None) -> StatementBuilder:
    return StatementBuilder(
        dialect or sqlite.dialect(paramstyle="named"),
        PlainFullText(),
        cache=CompiledStatementCache(0),
    )


def _bound(claims: MappingABC[str, object]) -> RecordPredicate:
    return bind_template(PARSED, MAPPING, claims)


def _forged(region: str, groups: tuple[str, ...]) -> RecordPredicate:
    """TEMPLATE's bound tree with any values, built by hand: no binder check applies.

    The builder must be safe for whatever was issued, even values the binder would refuse
    (a NUL, a lone surrogate, an empty string), because a future path might skip it.
    """
    return PredicateOr(
        (
            PredicateComparison('reg"ion; --', FieldType.TEXT, Operator.EQ, (region,)),
            PredicateAnd(
                (
                    PredicateComparison("Owner Col", FieldType.TEXT, Operator.IN, groups),
                    PredicateNot(
                        PredicateComparison("archived", FieldType.BOOLEAN, Operator.EQ, (True,))
                    ),
                )
            ),
            PredicateAnd(
                (
                    PredicateIsNull("published at"),
                    PredicateComparison(
                        "Category", FieldType.TEXT, Operator.NE, ("needle-literal",)
                    ),
                )
            ),
        )
    )


def _query(claims: MappingABC[str, object] = BENIGN, **overrides: Any) -> ValidatedQuery:
    values: dict[str, Any] = {"record_predicate": _bound(claims), "lookup_key": None}
    values.update(overrides)
    return issue(MAPPING, **values)


def _forged_query(region: str, groups: tuple[str, ...]) -> ValidatedQuery:
    return issue(MAPPING, record_predicate=_forged(region, groups), lookup_key=None)


def test_the_forged_tree_is_the_bound_tree() -> None:
    """The hand-built tree the injection tests use is exactly what the binder produces."""
    assert _forged("emea", ("g1", "g2")) == _bound(BENIGN)


@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_the_predicate_renders_per_dialect_with_numbered_binds(name: str) -> None:
    """Quoted identifiers from configuration, ``p0``… binds in depth-first order, AND-ed in."""
    dialect, expected = DIALECTS[name]
    built = _builder(dialect).build(_query())
    assert expected in built.sql
    assert {k: v for k, v in built.params.items() if re.fullmatch(r"p[0-9]+", k)} == {
        "p0": "emea",
        "p1": "g1",
        "p2": "g2",
        "p3": True,
        "p4": "needle-literal",
    }


def test_values_and_literals_never_reach_the_text() -> None:
    """Claim values and the template's own literals are parameters only."""
    built = _builder().build(_query({"region": "needle-region", "groups": ("needle-group",)}))
    assert "needle" not in built.sql
    assert built.params["p0"] == "needle-region"
    assert built.params["p1"] == "needle-group"
    assert built.params["p3"] == "needle-literal"


def test_the_predicate_is_added_to_the_structured_record_filters() -> None:
    """Both record-level mechanisms are in the WHERE clause, joined by AND."""
    sql = _builder().build(_query()).sql
    assert 'b."org`]" = :r0_0 AND (b."reg""ion; --" = :p0' in sql


def test_bind_names_follow_predicate_values() -> None:
    """``predicate_bind_name(i)`` names value ``i`` of ``predicate_values``."""
    predicate = _bound(BENIGN)
    built = _builder().build(_query())
    for i, (_, value) in enumerate(predicate_values(predicate)):
        name = predicate_bind_name(i)
        assert f":{name}" in built.sql
        assert built.params[name] == value


def test_equal_shapes_share_text_and_in_sizes_do_not() -> None:
    """The group count is part of the shape; values are not."""
    builder = StatementBuilder(sqlite.dialect(paramstyle="named"), PlainFullText())
    first = builder.build(_query({"region": "a", "groups": ("x", "y")}))
    second = builder.build(_query({"region": "b' OR 1=1", "groups": ("z", "w")}))
    third = builder.build(_query({"region": "a", "groups": ("x", "y", "z")}))
    assert first.sql == second.sql
    assert third.sql != first.sql
    assert "IN (:p1, :p2, :p3)" in third.sql
    info = builder.cache.info()
    assert (info.hits, info.misses) == (1, 2)


def test_columns_outside_the_mapping_fields_are_still_in_the_base_table() -> None:
    """``_base_table`` reads the predicate's columns itself, not only the mapping's fields."""
    predicate = PredicateComparison("only in predicate", FieldType.TEXT, Operator.EQ, ("v",))
    sql = _builder().build(issue(MAPPING, record_predicate=predicate, lookup_key=None)).sql
    assert 'b."only in predicate" = :p0' in sql


@pytest.mark.parametrize("node", [PredicateAnd(()), PredicateOr(())], ids=["and", "or"])
def test_an_empty_boolean_node_is_refused(node: RecordPredicate) -> None:
    """The binder never issues one; a forged one is an error, not an always-true clause."""
    with pytest.raises(ValueError, match="at least one operand"):
        _builder().build(issue(MAPPING, record_predicate=node, lookup_key=None))


def test_a_lookup_applies_the_predicate_too() -> None:
    """Reading one record by key for a fetch is filtered exactly as a search is."""
    sql = _builder().build(_query(lookup_key="k-1")).sql
    assert '(b."reg""ion; --" = :p0 OR' in sql


@settings(max_examples=200, deadline=None)
@given(
    region=st.text(max_size=40),
    groups=st.lists(st.text(max_size=20), min_size=2, max_size=2).map(tuple),
)
def test_any_claim_values_give_byte_identical_text(region: str, groups: tuple[str, ...]) -> None:
    """Whatever the claims hold, the command text is the benign text, byte for byte."""
    benign = _builder().compile(_query()).sql.encode()
    hostile = _builder().build(_forged_query(region, groups))
    assert hostile.sql.encode() == benign
    assert (hostile.params["p0"], hostile.params["p1"], hostile.params["p2"]) == (region, *groups)


def _assert_corpus_compiles_to_the_benign_text(dialect: Dialect, payloads: list[str]) -> None:
    builder = _builder(dialect)
    benign = builder.compile(_query()).sql.encode()
    for payload in payloads:
        built = builder.build(_forged_query(payload, (payload, payload[::-1])))
        assert built.sql.encode() == benign, payload
        assert built.params["p0"] == payload


@pytest.mark.external_data
@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_sqli_corpus_claims_give_byte_identical_text(name: str) -> None:
    """A spread of the public corpus, as every claim at once, leaves each dialect's text alone."""
    _assert_corpus_compiles_to_the_benign_text(DIALECTS[name][0], load_sqli_payloads()[::25])


@pytest.mark.slow
@pytest.mark.external_data
def test_the_whole_sqli_corpus_gives_byte_identical_text() -> None:
    """All of it, on one dialect: every payload as every claim compiles to the benign text."""
    _assert_corpus_compiles_to_the_benign_text(DIALECTS["postgresql"][0], load_sqli_payloads())
