"""Create the text index a mapping is searched through: a stored tsvector column with GIN.

The index is a column named by ``Mapping.text_index`` on the mapping's relation::

    ALTER TABLE <relation> ADD COLUMN IF NOT EXISTS <text_index> tsvector
        GENERATED ALWAYS AS (
            setweight(to_tsvector('<config>'::regconfig, coalesce(<title>::text, '')), 'A')
            || setweight(to_tsvector('<config>'::regconfig, coalesce(<col>::text, '')), 'B') ...
        ) STORED;
    CREATE INDEX IF NOT EXISTS <text_index>_gin ON <relation> USING gin (<text_index>);

PostgreSQL keeps a generated column in step with every insert and update, so no trigger is
needed. The title field is labelled ``A`` and the other indexed columns ``B``, for queries of
your own that weigh them (ESRA's provider ranks every occurrence alike, as BM25 over the whole
record does); concatenating per-column vectors also keeps a phrase from matching
across the end of one column and the start of the next. The configuration must be the one
the provider binds (``PostgresProvider(text_search_config=...)``).

This is administration — run it over a writable connection of your own; the provider itself
only ever reads. Identifiers are composed with ``psycopg.sql.Identifier`` and the
configuration name with ``psycopg.sql.Literal``; it is checked to be a real ``regconfig``
first, with a bound parameter.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql

from esra.core.config import Mapping
from esra.postgres._fulltext import DEFAULT_TEXT_SEARCH_CONFIG

__all__ = ["create_text_index", "text_index_columns", "text_index_statements"]

_MAX_IDENTIFIER = 63  # NAMEDATALEN - 1: longer names are truncated by the server


def text_index_columns(mapping: Mapping) -> tuple[str, ...]:
    """Return the physical columns to index: searchable fields, else title and content.

    Raises:
        ValueError: if the mapping names no column to index.
    """
    marked = [f.column for f in mapping.fields if f.is_searchable]
    if not marked:
        named = (mapping.field(n) for n in (mapping.title_field, *mapping.content_fields))
        marked = [f.column for f in named if f is not None]
    if not marked:
        msg = "the mapping has no column to index"
        raise ValueError(msg)
    return tuple(dict.fromkeys(marked))


def _relation(mapping: Mapping) -> sql.Composable:
    if mapping.schema:
        return sql.Identifier(mapping.schema, mapping.relation)
    return sql.Identifier(mapping.relation)


def _index_name(mapping: Mapping) -> str:
    name = f"{mapping.text_index}_gin"
    if len(name.encode()) <= _MAX_IDENTIFIER:
        return name
    # Deterministic (unlike hash()) so a second run finds the same index.
    digest = hashlib.blake2s(name.encode(), digest_size=4).hexdigest()
    return f"{name.encode()[:40].decode(errors='ignore')}_{digest}_gin"


def text_index_statements(
    mapping: Mapping,
    config: str = DEFAULT_TEXT_SEARCH_CONFIG,
    *,
    columns: Sequence[str] | None = None,
) -> tuple[sql.Composed, ...]:
    """Return the DDL adding ``mapping.text_index`` and its GIN index (idempotent).

    Args:
        mapping: names the relation, its schema and the tsvector column.
        config: the text search configuration the vector is generated with.
        columns: physical columns to index; ``text_index_columns(mapping)`` by default.

    Raises:
        ValueError: if the mapping has no ``text_index`` or nothing to index.
    """
    if not mapping.text_index:
        msg = "the mapping names no text index"
        raise ValueError(msg)
    cols = tuple(columns) if columns is not None else text_index_columns(mapping)
    if not cols:
        msg = "no column to index"
        raise ValueError(msg)
    title = mapping.field(mapping.title_field)
    title_column = title.column if title is not None else None
    parts = [
        sql.SQL("setweight(to_tsvector({cfg}::regconfig, coalesce({col}::text, '')), {w})").format(
            cfg=sql.Literal(config),
            col=sql.Identifier(column),
            w=sql.Literal("A" if column == title_column else "B"),
        )
        for column in cols
    ]
    relation = _relation(mapping)
    vector = sql.Identifier(mapping.text_index)
    add_column = sql.SQL(
        "ALTER TABLE {rel} ADD COLUMN IF NOT EXISTS {vec} tsvector "
        "GENERATED ALWAYS AS ({expr}) STORED"
    ).format(rel=relation, vec=vector, expr=sql.SQL(" || ").join(parts))
    add_index = sql.SQL("CREATE INDEX IF NOT EXISTS {name} ON {rel} USING gin ({vec})").format(
        name=sql.Identifier(_index_name(mapping)), rel=relation, vec=vector
    )
    return (add_column, add_index)


async def create_text_index(
    connection: psycopg.AsyncConnection[Any],
    mapping: Mapping,
    config: str = DEFAULT_TEXT_SEARCH_CONFIG,
    *,
    columns: Sequence[str] | None = None,
) -> None:
    """Add ``mapping.text_index`` (a generated tsvector column) and its GIN index.

    Runs in one transaction (a savepoint if one is already open). Existing rows are indexed
    by the ``ALTER TABLE`` rewrite; later writes keep the generated column current.

    Raises:
        ValueError: if the mapping has no ``text_index`` or nothing to index.
        psycopg.Error: if ``config`` is no text search configuration, or the DDL fails.
    """
    statements = text_index_statements(mapping, config, columns=columns)
    async with connection.transaction():
        # Fails (42704) before any DDL if the configuration does not exist.
        await connection.execute("SELECT CAST(%s::text AS regconfig)", (config,))
        for statement in statements:
            await connection.execute(statement)
