"""Tests for esra.sql._builder: quoting, deterministic binds, the cache, the bound LIMIT."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy.dialects import mssql, mysql, oracle, postgresql, sqlite
from sqlalchemy.engine.interfaces import Dialect

from esra.core._config.mapping import FieldType, Operator
from esra.core._pipeline.values import ValidatedQuery
from esra.core._query import ResolvedFilter, Strategy
from esra.core.exceptions import UnvalidatedQueryError
from esra.sql import (
    LIMIT_BIND,
    CompiledStatementCache,
    FullTextDialect,
    StatementBuilder,
)
from tests.sql.conftest import HOSTILE_MAPPING, PlainFullText, issue


def _builder(cache: CompiledStatementCache | None = None) -> StatementBuilder:
    return StatementBuilder(sqlite.dialect(paramstyle="named"), PlainFullText(), cache=cache)


def _in_filter(count: int, prefix: str = "v") -> ResolvedFilter:
    values = tuple(f"{prefix}{i}" for i in range(count))
    return ResolvedFilter("Category", FieldType.TEXT, Operator.IN, values)


def test_plain_fulltext_satisfies_the_protocol() -> None:
    """The test double is a structural FullTextDialect, as real engines must be."""
    assert isinstance(PlainFullText(), FullTextDialect)


def test_hostile_identifiers_from_configuration_are_quoted() -> None:
    """Relation, schema and column names are emitted only as quoted identifiers."""
    sql = _builder().build(issue()).sql
    assert '"sch""ema"."docs""; DROP TABLE users; --" AS b' in sql
    assert 'b."ti""tle"' in sql
    assert 'b."body) OR 1=1 --"' in sql
    assert 'b."key id"' in sql
    assert 'b."org`]"' in sql
    # Nothing of the relation name appears outside its quotes.
    assert sql.count("DROP TABLE") == 1


def test_bind_names_are_deterministic_and_values_never_in_text() -> None:
    """Binds are named by position (t0, f0_0, r0_0, lim); the values live in params only."""
    query = issue(
        required_terms=("needle-required",),
        optional_terms=("needle-optional",),
        filters=(_in_filter(3, prefix="needle-filter-"),),
    )
    built = _builder().build(query)
    for name in ("t0", "t1", "f0_0", "f0_1", "f0_2", "r0_0", LIMIT_BIND):
        assert f":{name}" in built.sql
    assert "needle" not in built.sql
    assert "acme" not in built.sql
    assert built.params["t0"] == "needle-required"
    assert built.params["t1"] == "needle-optional"
    assert built.params["f0_2"] == "needle-filter-2"
    assert built.params["r0_0"] == "acme"
    assert 'b."Category" IN (:f0_0, :f0_1, :f0_2)' in built.sql


def test_equal_shapes_give_byte_identical_text() -> None:
    """Different values in the same shape compile to the same bytes, even uncached."""
    builder = _builder(CompiledStatementCache(0))
    first = builder.build(issue(optional_terms=("a",), row_limit=5))
    second = builder.build(issue(optional_terms=("b' OR '1'='1",), row_limit=50))
    assert first.sql.encode() == second.sql.encode()
    assert first.params != second.params


def test_cache_hits_on_an_equal_shape_and_misses_on_another() -> None:
    """A second query of the same shape reuses the compiled text; a new shape compiles."""
    builder = _builder()
    builder.build(issue(optional_terms=("a",)))
    builder.build(issue(optional_terms=("b",), row_limit=3))
    info = builder.cache.info()
    assert (info.hits, info.misses, info.size) == (1, 1, 1)
    builder.build(issue(optional_terms=("a", "b")))
    info = builder.cache.info()
    assert (info.hits, info.misses, info.size) == (1, 2, 2)


def test_cache_is_bounded_least_recently_used() -> None:
    """Beyond maxsize the least recently used shape is evicted."""
    builder = _builder(CompiledStatementCache(2))
    one, two, three = (issue(optional_terms=("x",) * n) for n in (1, 2, 3))
    builder.build(one)
    builder.build(two)
    builder.build(one)  # one is now most recent
    builder.build(three)  # evicts two
    builder.build(one)
    assert builder.cache.info().hits == 2
    builder.build(two)
    assert builder.cache.info().misses == 4


def test_disabled_cache_compiles_every_time() -> None:
    """maxsize=0 never stores, so every build compiles."""
    builder = _builder(CompiledStatementCache(0))
    builder.build(issue())
    builder.build(issue())
    assert builder.cache.info().misses == 2
    assert builder.cache.info().size == 0


def test_limit_is_a_bound_parameter() -> None:
    """The row cap is a bind parameter in the statement, not text."""
    built = _builder().build(issue(row_limit=7))
    assert re.search(r"LIMIT :lim\b", built.sql)
    assert built.params[LIMIT_BIND] == 7
    assert " 7" not in built.sql


def test_orders_by_score_then_key() -> None:
    """Non-recent strategies order by score descending, then key ascending."""
    sql = _builder().build(issue()).sql
    assert sql.split("ORDER BY", 1)[1].split("LIMIT")[0].strip() == "esra_s DESC, esra_k ASC"


def test_recent_orders_by_freshness_first() -> None:
    """RECENT orders by the freshness column, then score, then key."""
    sql = _builder().build(issue(strategy=Strategy.RECENT)).sql
    order = sql.split("ORDER BY", 1)[1].split("LIMIT")[0].strip()
    assert order == 'b."published at" DESC, esra_s DESC, esra_k ASC'


def test_result_columns_map_back_to_business_names() -> None:
    """Positional labels map to business names; freshness is appended when not projected."""
    built = _builder().build(issue())
    assert [(c.label, c.field) for c in built.columns] == [
        ("esra_c0", "title"),
        ("esra_c1", "body"),
        ("esra_c2", "published"),
    ]
    row = built.to_row(("k1", 2.5, "T", "B", "2024-01-01"))
    assert row.key == "k1"
    assert row.score == 2.5
    assert dict(row.values) == {"title": "T", "body": "B", "published": "2024-01-01"}


def test_refuses_a_forged_query() -> None:
    """The builder re-checks the seal: an object the validator never issued is refused."""
    forged = object.__new__(ValidatedQuery)
    with pytest.raises(UnvalidatedQueryError):
        _builder().build(forged)


def test_positional_paramstyle_is_refused() -> None:
    """A positional paramstyle cannot serve one params dict per cached text."""
    with pytest.raises(ValueError, match="named paramstyle"):
        StatementBuilder(sqlite.dialect(), PlainFullText())


def test_empty_in_filter_is_refused() -> None:
    """An IN filter without values cannot be expressed without post-compile expansion."""
    with pytest.raises(ValueError, match="IN filter"):
        _builder().build(issue(filters=(_in_filter(0),)))


@pytest.mark.parametrize(
    "dialect",
    [
        sqlite.dialect(paramstyle="named"),
        postgresql.psycopg.dialect(),  # type: ignore[no-untyped-call]
        mysql.pymysql.dialect(paramstyle="pyformat"),
        mssql.pymssql.dialect(paramstyle="pyformat"),  # type: ignore[no-untyped-call]
        oracle.oracledb.dialect(),  # type: ignore[no-untyped-call]
    ],
    ids=["sqlite", "postgresql", "mysql", "mssql", "oracle"],
)
def test_every_target_dialect_compiles_with_named_binds(dialect: Dialect) -> None:
    """Each engine ESRA targets compiles the statement with named binds and no values."""
    builder = StatementBuilder(dialect, PlainFullText())
    built = builder.build(issue(filters=(_in_filter(2, prefix="needle"),)))
    assert "needle" not in built.sql
    assert "acme" not in built.sql
    assert "POSTCOMPILE" not in built.sql
    assert {"t0", "f0_0", "f0_1", "r0_0", LIMIT_BIND} <= set(built.params)


_DIALECTS = [
    sqlite.dialect(paramstyle="named"),
    postgresql.psycopg.dialect(),  # type: ignore[no-untyped-call]
    mysql.pymysql.dialect(paramstyle="pyformat"),
    mssql.pymssql.dialect(paramstyle="pyformat"),  # type: ignore[no-untyped-call]
    oracle.oracledb.dialect(),  # type: ignore[no-untyped-call]
]


@pytest.mark.parametrize(
    "dialect", _DIALECTS, ids=["sqlite", "postgresql", "mysql", "mssql", "oracle"]
)
@pytest.mark.parametrize("lookup_key", [None, "k' OR '1'='1"], ids=["search", "lookup"])
def test_every_parameter_sent_is_named_in_the_statement(
    dialect: Dialect, lookup_key: str | None
) -> None:
    """No stray parameters (an anonymous bind's internal key once rode along)."""
    built = StatementBuilder(dialect, PlainFullText()).build(issue(lookup_key=lookup_key))
    # pyformat's %(name)s, or named's :name (not a PostgreSQL ::cast).
    rendered = set(re.findall(r"%\((\w+)\)s|(?<![:\w]):(\w+)", built.sql))
    named = {a or b for a, b in rendered}
    assert set(built.params) == named
    if lookup_key is not None:
        assert lookup_key not in built.sql
        assert built.params["lk"] == lookup_key


_TEXT = st.text(min_size=0, max_size=40)


@settings(max_examples=200, deadline=None)
@given(
    required=_TEXT, optional=_TEXT, phrase=_TEXT, value=_TEXT, claim=_TEXT,
    limit=st.integers(min_value=1, max_value=500),
)  # fmt: skip
def test_any_values_compile_to_the_benign_text(
    *, required: str, optional: str, phrase: str, value: str, claim: str, limit: int
) -> None:
    """Whatever the values, the uncached text equals the benign query's of the same shape."""
    builder = _builder(CompiledStatementCache(0))

    def query(values: tuple[str, str, str, str, str], row_limit: int) -> ValidatedQuery:
        r, o, p, v, c = values
        return issue(
            required_terms=(r,),
            optional_terms=(o,),
            phrases=(p,),
            filters=(ResolvedFilter("Category", FieldType.TEXT, Operator.EQ, (v,)),),
            record_filters=(ResolvedFilter("org`]", FieldType.TEXT, Operator.EQ, (c,)),),
            row_limit=row_limit,
        )

    benign = builder.build(query(("a", "b", "c d", "news", "acme"), 10)).sql
    hostile = builder.build(query((required, optional, phrase, value, claim), limit))
    assert hostile.sql == benign
    assert hostile.params["f0_0"] == value
    assert hostile.params["r0_0"] == claim


def test_hostile_mapping_has_the_columns_the_tests_assume() -> None:
    """Guard: the fixture mapping really carries the hostile names asserted above."""
    assert HOSTILE_MAPPING.relation.endswith("--")
    assert HOSTILE_MAPPING.field("category") is not None


def test_a_rendered_statement_names_its_parameters_and_carries_no_value() -> None:
    """What operator explain shows: the built text and the bind names, never the values."""
    query = issue(
        required_terms=("needle-required",),
        filters=(_in_filter(2, prefix="needle-filter-"),),
    )
    rendered = _builder().render(query)
    built = _builder().build(query)
    assert rendered.text == built.sql
    assert rendered.parameters == tuple(sorted(built.params))
    assert {"t0", "f0_0", "f0_1", "r0_0", LIMIT_BIND} <= set(rendered.parameters)
    assert "needle" not in repr(rendered)
    assert "acme" not in repr(rendered)
