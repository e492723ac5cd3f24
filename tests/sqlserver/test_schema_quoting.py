"""A mapping's configured schema is always one bracketed T-SQL identifier, never structure.

SQLAlchemy's ``mssql`` quoter reads a plain schema string as ``database.owner``: it splits it on
``.`` and emits a part holding internal brackets verbatim, so a schema such as
``[a].x; SELECT ... --.[c].dbo`` used to put ``x; SELECT ... --`` into the command text. The
provider passes the schema as one quoted name everywhere it names a relation: the search and
lookup statements (the base table and each CONTAINSTABLE / FREETEXTTABLE argument), the health
probe's bound object name and the full-text index DDL. Ordinary schemas render as before.
"""

from __future__ import annotations

from typing import Any

import attrs
import pymssql
import pytest
import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import ErrorLevel, exp

from esra.core._config.source import SourceHealth
from esra.core.testing.contract import CONTRACT_MAPPING
from esra.sqlserver import fulltext_index_statements
from esra.sqlserver._provider import _quoted_name
from tests.sqlserver._fake_mssql import FakeConnection, FakeMssql
from tests.sqlserver.conftest import issue, provider, uncached_builder

PAYLOAD = "x; SELECT name, password_hash FROM sys.sql_logins--"
SCHEMA = f"[a].{PAYLOAD}.[c].dbo"
# The whole schema as one delimited identifier: brackets around it, each ``]`` doubled.
IDENTIFIER = "[" + SCHEMA.replace("]", "]]") + "]"

# Searches with every full-text function, and a document-fetch lookup.
_SHAPES: dict[str, dict[str, Any]] = {
    "search": {
        "required_terms": ("solar",),
        "phrases": ("solar panel",),
        "optional_terms": ("panel",),
        "excluded_terms": ("draft",),
    },
    "optional_only": {"optional_terms": ("panel",)},
    "lookup": {"lookup_key": "a07", "row_limit": 1},
}


def _mapping(schema: str | None) -> Any:
    return attrs.evolve(CONTRACT_MAPPING, schema=schema, text_index="esra_catalog")


def _only_inside_the_identifier(text: str) -> None:
    """The payload occurs in ``text`` only as part of ``IDENTIFIER``."""
    assert IDENTIFIER in text, text
    rest = text.replace(IDENTIFIER, "<schema>")
    assert "sql_logins" not in rest, rest
    assert "password_hash" not in rest, rest
    assert "[a]" not in rest, rest


@pytest.mark.parametrize("shape", sorted(_SHAPES))
def test_a_hostile_schema_is_one_identifier_in_every_statement(shape: str) -> None:
    built = uncached_builder().build(issue(mapping=_mapping(SCHEMA), **_SHAPES[shape]))
    _only_inside_the_identifier(built.sql)
    relations = 1 + (4 if shape == "search" else 1 if shape == "optional_only" else 0)
    assert built.sql.count(IDENTIFIER + ".contract_articles") == relations, built.sql
    # An independent T-SQL parser reads one SELECT whose every relation is in that schema.
    tree = sqlglot.parse_one(built.sql.replace("%(", "@").replace(")s", ""), read="tsql",
                             error_level=ErrorLevel.RAISE)  # fmt: skip
    assert isinstance(tree, exp.Select)
    tables = [t for t in tree.find_all(exp.Table) if t.name == "contract_articles"]
    assert tables
    assert {t.db for t in tables} == {SCHEMA}
    assert all(not t.catalog for t in tables)


def test_a_hostile_schema_is_one_identifier_in_the_health_probe() -> None:
    assert _quoted_name(_mapping(SCHEMA)) == IDENTIFIER + ".contract_articles"


async def test_the_health_probe_binds_the_single_identifier(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """End to end over the recording driver: ``OBJECT_ID(@name)`` gets one schema part."""
    fake = FakeMssql([(1,)])
    monkeypatch.setattr(pymssql, "connect", lambda **_: FakeConnection(fake))
    p = provider(mappings=(_mapping(SCHEMA),))
    assert await p.health() is SourceHealth.HEALTHY
    await p.close()
    (proc,) = fake.procedures
    binds = {b.name: b.value for b in proc.binds}
    assert binds["@name"] == IDENTIFIER + ".contract_articles"
    assert PAYLOAD not in str(binds["@stmt"])


def test_a_hostile_schema_is_one_identifier_in_the_index_ddl() -> None:
    catalog, index = fulltext_index_statements(_mapping(SCHEMA), key_index="pk_contract")
    assert SCHEMA not in catalog
    _only_inside_the_identifier(index)
    assert index.startswith(f"CREATE FULLTEXT INDEX ON {IDENTIFIER}.contract_articles (")


@pytest.mark.parametrize(
    ("schema", "qualifier"),
    [
        (None, ""),
        ("sales", "sales."),
        ("dbo", "dbo."),
        ("Sales Ops", "[Sales Ops]."),
        ("select", "[select]."),
        ("a]b", "[a]]b]."),
        # A dotted name is one schema called "otherdb.dbo", never database "otherdb".
        ("otherdb.dbo", "[otherdb.dbo]."),
        ("[otherdb].[dbo]", "[[otherdb]].[dbo]]]."),
    ],
)
def test_every_site_names_the_relation_alike(schema: str | None, qualifier: str) -> None:
    """Ordinary schemas render as they always did; any other is one bracketed identifier."""
    name = f"{qualifier}contract_articles"
    mapping = _mapping(schema)
    assert _quoted_name(mapping) == name
    assert (
        f"CREATE FULLTEXT INDEX ON {name} ("
        in fulltext_index_statements(mapping, key_index="pk")[1]
    )
    built = uncached_builder().build(issue(mapping=mapping, **_SHAPES["search"]))
    assert f"FROM {name} AS b" in built.sql
    assert built.sql.count(f"CONTAINSTABLE({name}, ") == 3
    assert built.sql.count(f"FREETEXTTABLE({name}, ") == 1


_SCHEMA_TEXT = st.text(
    alphabet=st.sampled_from("ab_$1 .[]\"';-*/\\\x00é"), min_size=1, max_size=24
) | st.text(min_size=1, max_size=24)


@settings(max_examples=300, deadline=None)
@given(schema=_SCHEMA_TEXT)
def test_any_schema_text_is_exactly_one_identifier(schema: str) -> None:
    """Whatever the configured text, it is emitted whole: either a plain identifier or one
    delimited identifier with ``]`` doubled, at the health probe, the DDL and the statement."""
    mapping = _mapping(schema)
    quoted = _quoted_name(mapping)
    assert quoted.endswith(".contract_articles")
    qualifier = quoted.removesuffix(".contract_articles")
    if qualifier.startswith("["):
        assert qualifier == "[" + schema.replace("]", "]]") + "]"
    else:  # left bare only when it is an ordinary identifier: letters, digits, _ and $
        assert qualifier == schema
        assert schema.isascii()
        assert schema.replace("_", "a").replace("$", "a").isalnum()
    ddl = fulltext_index_statements(mapping, key_index="pk")[1]
    assert ddl.startswith(f"CREATE FULLTEXT INDEX ON {quoted} (")
    built = uncached_builder().build(issue(mapping=mapping, **_SHAPES["search"]))
    assert f"FROM {quoted} AS b" in built.sql
    assert built.sql.count(f"CONTAINSTABLE({quoted}, ") == 3
