"""Tests for esra.sqlite._index: the external-content FTS5 index and its triggers."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import attrs
import pytest

from esra.core._config.mapping import FieldSpec, FieldType, Mapping
from esra.core._pipeline.values import ValidatedQuery, _issue
from esra.core._query import ProjectedField, Strategy
from esra.sqlite import SqliteFts5Provider, fts5_index_columns, fts5_index_statements
from tests.sqlite.conftest import seed_database

# Configured names a careless DDL generator would turn into SQL structure.
_HOSTILE = Mapping(
    id="hostile",
    tenant_id="t",
    source_id="s",
    business_name="Hostile",
    description="",
    relation="we\"ird'; DROP TABLE x; --",
    record_key='k"ey',
    title_field="title",
    content_fields=("body",),
    fields=(
        FieldSpec("title", "ti'tle", is_returnable=True),
        FieldSpec("body", 'bo"dy) --', is_returnable=True),
    ),
    text_index="f\"t's idx",
)
_COLUMNS = [('k"ey', FieldType.TEXT), ("ti'tle", FieldType.TEXT), ('bo"dy) --', FieldType.TEXT)]


def _query(mapping: Mapping, term: str) -> ValidatedQuery:
    return _issue(
        query_id="s#1",
        source_id="s",
        mapping=mapping,
        strategy=Strategy.KEYWORD,
        required_terms=(term,),
        optional_terms=(),
        excluded_terms=(),
        phrases=(),
        filters=(),
        record_filters=(),
        projection=(ProjectedField("title", "ti'tle"), ProjectedField("body", 'bo"dy) --')),
        freshness=None,
        row_limit=10,
    )


def test_columns_default_to_title_and_content_when_none_is_searchable() -> None:
    """Without searchable fields the title and content columns are indexed."""
    assert fts5_index_columns(_HOSTILE) == ("ti'tle", 'bo"dy) --')


def test_statements_need_a_text_index() -> None:
    """A mapping without ``text_index`` has nothing to create."""
    with pytest.raises(ValueError, match="text index"):
        fts5_index_statements(attrs.evolve(_HOSTILE, text_index=None))


async def test_hostile_names_index_search_and_stay_in_sync(tmp_path: Path) -> None:
    """Quoted DDL works for hostile names; triggers mirror insert, update and delete."""
    path = tmp_path / "hostile.db"
    rows = [{'k"ey': "r1", "ti'tle": "Alpha title", 'bo"dy) --': "first body"}]
    seed_database(path, _HOSTILE, _COLUMNS, rows)
    provider = SqliteFts5Provider(path, mappings=(_HOSTILE,))
    try:
        assert [r.key for r in await provider.execute(_query(_HOSTILE, "alpha"), timeout_s=5)] == [
            "r1"
        ]
        table = '"we""ird\'; DROP TABLE x; --"'
        with sqlite3.connect(path) as writer:
            writer.execute(f"INSERT INTO {table} VALUES ('r2', 'Beta', 'second body')")
            writer.execute(f'UPDATE {table} SET "ti\'tle" = \'Gamma\' WHERE "k""ey" = \'r1\'')
        writer.close()
        found = await provider.execute(_query(_HOSTILE, "body"), timeout_s=5)
        assert {r.key for r in found} == {"r1", "r2"}
        assert list(await provider.execute(_query(_HOSTILE, "alpha"), timeout_s=5)) == []
        gamma = await provider.execute(_query(_HOSTILE, "gamma"), timeout_s=5)
        assert [(r.key, r.values["title"]) for r in gamma] == [("r1", "Gamma")]
        with sqlite3.connect(path) as writer:
            writer.execute(f'DELETE FROM {table} WHERE "k""ey" = \'r2\'')
        writer.close()
        assert list(await provider.execute(_query(_HOSTILE, "beta"), timeout_s=5)) == []
        with sqlite3.connect(path) as checker:
            assert checker.execute(
                "SELECT count(*) FROM sqlite_master WHERE name = 'x'"
            ).fetchone() == (0,)
        checker.close()
    finally:
        provider.close()
