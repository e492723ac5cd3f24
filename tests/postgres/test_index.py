"""Tests for esra.postgres._index: the generated tsvector column and its GIN index."""

from __future__ import annotations

import attrs
import psycopg
import pytest

from esra.core._config.mapping import FieldType
from esra.core.testing.contract import CONTRACT_COLUMNS, CONTRACT_MAPPING, CONTRACT_ROWS
from esra.postgres import create_text_index, text_index_columns, text_index_statements
from tests.postgres.conftest import admin, seed_table


def test_columns_are_the_searchable_fields() -> None:
    """Searchable fields are indexed; without any, the title and content fields."""
    assert text_index_columns(CONTRACT_MAPPING) == ("art_title", "Art Body")
    plain = attrs.evolve(
        CONTRACT_MAPPING,
        fields=tuple(attrs.evolve(f, is_searchable=False) for f in CONTRACT_MAPPING.fields),
    )
    assert text_index_columns(plain) == ("art_title", "Art Body")


def test_statements_quote_identifiers_and_the_config() -> None:
    """Identifiers are quoted, the configuration is a literal, the title weighs A."""
    mapping = attrs.evolve(CONTRACT_MAPPING, schema="Sales")
    add_column, add_index = (s.as_string() for s in text_index_statements(mapping, "it's"))
    assert add_column.startswith(
        'ALTER TABLE "Sales"."contract_articles" ADD COLUMN IF NOT EXISTS '
        '"contract_articles_fts" tsvector GENERATED ALWAYS AS ('
    )
    assert "to_tsvector('it''s'::regconfig, coalesce(\"art_title\"::text, '')), 'A')" in add_column
    assert "coalesce(\"Art Body\"::text, '')), 'B')" in add_column
    assert add_column.endswith(") STORED")
    assert add_index == (
        'CREATE INDEX IF NOT EXISTS "contract_articles_fts_gin" ON "Sales"."contract_articles" '
        'USING gin ("contract_articles_fts")'
    )


def test_statements_refuse_a_mapping_without_text_index() -> None:
    """No text_index configured: nothing to create."""
    with pytest.raises(ValueError, match="text index"):
        text_index_statements(attrs.evolve(CONTRACT_MAPPING, text_index=None))


def test_long_index_names_stay_deterministic() -> None:
    """A name past 63 bytes is shortened the same way every time."""
    mapping = attrs.evolve(CONTRACT_MAPPING, text_index="x" * 70)
    first = text_index_statements(mapping)[1].as_string()
    assert first == text_index_statements(mapping)[1].as_string()
    assert "x" * 70 not in first.split(" ON ")[0]


@pytest.mark.postgres
@pytest.mark.integration
async def test_create_text_index_live(pg_dsn: str, pg_schema: str) -> None:
    """The column is a stored generated tsvector with a GIN index, kept current, idempotent."""
    seed_table(
        pg_dsn, pg_schema, CONTRACT_MAPPING, CONTRACT_COLUMNS, CONTRACT_ROWS, with_index=False
    )
    mapping = attrs.evolve(CONTRACT_MAPPING, schema=pg_schema)
    async with await psycopg.AsyncConnection.connect(pg_dsn) as conn:
        await create_text_index(conn, mapping, "simple")
        await create_text_index(conn, mapping, "simple")  # a second run changes nothing
        await conn.commit()
    with admin(pg_dsn) as conn:
        kind = conn.execute(
            "SELECT format_type(atttypid, atttypmod), attgenerated FROM pg_attribute "
            "WHERE attrelid = to_regclass(%s) AND attname = %s",
            (f'"{pg_schema}".contract_articles', "contract_articles_fts"),
        ).fetchone()
        assert kind == ("tsvector", "s")
        methods = conn.execute(
            "SELECT am.amname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "JOIN pg_am am ON am.oid = c.relam WHERE i.indrelid = to_regclass(%s)",
            (f'"{pg_schema}".contract_articles',),
        ).fetchall()
        assert methods == [("gin",)]
        conn.execute(
            f'INSERT INTO "{pg_schema}".contract_articles (art_key, art_title) '
            "VALUES ('z1', 'Zebra crossing')"
        )
        found = conn.execute(
            f'SELECT art_key FROM "{pg_schema}".contract_articles '
            "WHERE contract_articles_fts @@ plainto_tsquery('simple', 'zebra')"
        ).fetchall()
        assert found == [("z1",)]


@pytest.mark.postgres
@pytest.mark.integration
async def test_create_text_index_refuses_an_unknown_config(pg_dsn: str, pg_schema: str) -> None:
    """An unknown configuration fails (42704) before any DDL runs."""
    seed_table(
        pg_dsn,
        pg_schema,
        CONTRACT_MAPPING,
        (("art_key", FieldType.TEXT), ("art_title", FieldType.TEXT), ("Art Body", FieldType.TEXT)),
        [],
        with_index=False,
    )
    mapping = attrs.evolve(CONTRACT_MAPPING, schema=pg_schema)
    async with await psycopg.AsyncConnection.connect(pg_dsn) as conn:
        with pytest.raises(psycopg.errors.UndefinedObject):
            await create_text_index(conn, mapping, "no_such_config")
