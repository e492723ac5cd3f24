"""The leak scanner recognises every bind name and label of every engine's statements.

``esra.core.testing.leaks`` looks for ESRA's own statement vocabulary even in returned data,
where SQL in general may legitimately appear. That vocabulary lives in the builders, so this
guards the scanner against a builder or full-text dialect that starts naming binds
differently: each engine builds its widest statement shapes, and every bind name in them must
be found in both paramstyles, and the statement text itself must be found as content.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from typing import Any

import attrs
import pytest
from sqlalchemy.dialects import postgresql, sqlite

from esra.core._config.mapping import FieldSpec, FieldType, Mapping, Operator
from esra.core._config.record_filter_template import parse_record_filter_template
from esra.core._pipeline.values import ValidatedQuery
from esra.core._query import ProjectedField, ResolvedFilter
from esra.core._record_predicate import bind_template
from esra.core._response import ResponseStatus, ResultItem, RetrievalResponse
from esra.core.testing.leaks import LeakCategory, scan
from esra.sql import StatementBuilder
from tests.sql.conftest import HOSTILE_MAPPING, issue


def _attribute(module: str, name: str) -> Any:
    return getattr(pytest.importorskip(module), name)


def _postgres() -> StatementBuilder:
    fulltext = _attribute("esra.postgres._fulltext", "TsvectorFullText")()
    dialect = postgresql.psycopg.dialect(paramstyle="pyformat")  # type: ignore[no-untyped-call]
    return StatementBuilder(dialect, fulltext)


def _mysql() -> StatementBuilder:
    fulltext = _attribute("esra.mysql._fulltext", "MatchAgainstFullText")()
    return StatementBuilder(_attribute("esra.mysql._quote", "DIALECT"), fulltext)


def _sqlite() -> StatementBuilder:
    fulltext = _attribute("esra.sqlite._fulltext", "Fts5FullText")()
    return StatementBuilder(sqlite.dialect(paramstyle="named"), fulltext)


def _sqlserver() -> StatementBuilder:
    dialect = _attribute("esra.sqlserver._provider", "sqlserver_dialect")()
    return StatementBuilder(dialect, _attribute("esra.sqlserver._fulltext", "SqlServerFullText")())


def _oracle() -> StatementBuilder:
    dialect = _attribute("esra.oracle._provider", "oracle_dialect")()
    return StatementBuilder(dialect, _attribute("esra.oracle._fulltext", "OracleTextFullText")())


ENGINES: dict[str, Callable[[], StatementBuilder]] = {
    "postgres": _postgres,
    "mysql": _mysql,
    "sqlite": _sqlite,
    "sqlserver": _sqlserver,
    "oracle": _oracle,
}

TEMPLATE = "region = {claim:region} OR (category IN {claim:groups} AND NOT published IS NULL)"


def _quote_free(mapping: Mapping) -> Mapping:
    """``mapping`` with each ``"`` of a physical name made ``'``: no Oracle name holds one."""
    return attrs.evolve(
        mapping,
        relation=mapping.relation.replace('"', "'"),
        schema=(mapping.schema or "").replace('"', "'") or None,
        fields=tuple(attrs.evolve(f, column=f.column.replace('"', "'")) for f in mapping.fields),
    )


# The hostile names each engine can have: Oracle refuses any holding a double quote.
BASE_MAPPINGS = {"oracle": _quote_free(HOSTILE_MAPPING)}


def _queries(base: Mapping) -> list[ValidatedQuery]:
    mapping = attrs.evolve(
        base,
        fields=(*base.fields, FieldSpec("region", "region_col")),
        record_filter_template=TEMPLATE,
    )
    projected = tuple(
        ProjectedField(n, spec.column) for n in ("title", "body") if (spec := base.field(n))
    )
    predicate = bind_template(
        parse_record_filter_template(TEMPLATE, mapping),
        mapping,
        {"region": "emea", "groups": ("g1", "g2")},
    )
    filters = (ResolvedFilter("Category", FieldType.TEXT, Operator.IN, ("a", "b")),)
    return [
        issue(
            base,
            required_terms=("solar", "panel"),
            optional_terms=("inverter", "battery"),
            excluded_terms=("diesel",),
            phrases=("grid tie",),
            filters=filters,
            projection=projected,
        ),
        issue(
            base,
            required_terms=(),
            optional_terms=(),
            excluded_terms=("diesel",),
            projection=projected,
        ),
        issue(mapping, record_predicate=predicate, lookup_key=None, projection=projected),
        issue(base, lookup_key="k-1", optional_terms=(), projection=projected),
    ]


def _as_content(text: str) -> RetrievalResponse:
    item = ResultItem("r_1", "Source", "title", text, 1.0, {"note": text})
    return RetrievalResponse(ResponseStatus.COMPLETE, (item,), (), "corr-1")


@pytest.mark.parametrize("engine", ENGINES)
def test_every_bind_name_and_statement_is_recognised_in_returned_data(engine: str) -> None:
    """Quoting any bind of any statement, or the statement, in a result is a detected leak."""
    builder = ENGINES[engine]()
    names: set[str] = set()
    for query in _queries(BASE_MAPPINGS.get(engine, HOSTILE_MAPPING)):
        try:
            built = builder.build(query)
        except ValueError:
            continue  # a shape this engine cannot express: the validator never issues it
        # Only names the text renders: SQLAlchemy also keys constants by an internal name.
        names.update(n for n in built.params if re.fullmatch(r"\w+", n))
        leaks = scan(_as_content(built.sql))
        assert LeakCategory.SQL in {leak.category for leak in leaks}, built.sql
    assert names
    for name in sorted(names):
        for quoted in (f"%({name})s", f"= :{name} AND"):
            rules = {leak.rule for leak in scan(_as_content(quoted))}
            assert rules & {"sql.esra_bind_pyformat", "sql.esra_bind_named"}, quoted


def test_the_engines_are_importable_here() -> None:
    """The drift guard above only means something when the adapters are installed."""
    for module in ("esra.postgres", "esra.mysql", "esra.sqlite"):
        importlib.import_module(module)
