"""Build the demo's three SQLite databases (tables, rows, FTS5 indexes) in a directory."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path

from esra.core.config import ConfigSnapshot
from esra.sqlite import SqliteFts5Provider, create_fts5_index
from esra.starlette._demo import data

__all__ = ["build_demo_databases", "demo_providers"]

_TABLES: dict[str, tuple[str, str, Sequence[tuple[object, ...]]]] = {
    # relation: (database file, column list, rows)
    "products": (
        "catalog.db",
        "sku TEXT PRIMARY KEY, name TEXT, category TEXT, description TEXT, price_eur REAL, "
        "cost_eur REAL, updated TEXT",
        data.PRODUCTS,
    ),
    "tickets": (
        "support.db",
        "ticket_id TEXT PRIMARY KEY, subject TEXT, body TEXT, sku TEXT, status TEXT, "
        "region TEXT, customer_email TEXT, internal_notes TEXT, opened TEXT",
        data.TICKETS,
    ),
    "kb_articles": (
        "support.db",
        "article_id TEXT PRIMARY KEY, title TEXT, body TEXT, updated TEXT",
        data.ARTICLES,
    ),
    "policies": (
        "hr.db",
        "policy_id TEXT PRIMARY KEY, title TEXT, body TEXT, owner_team TEXT, updated TEXT",
        data.POLICIES,
    ),
}


def build_demo_databases(directory: Path, snapshot: ConfigSnapshot) -> None:
    """Create every demo table with its rows and its mapping's FTS5 index under ``directory``.

    The DDL here is the demo's own fixed schema (no user input); the FTS index comes from
    ``esra.sqlite.create_fts5_index`` so it matches what the provider searches.
    """
    for mapping in snapshot.mappings:
        filename, columns, rows = _TABLES[mapping.relation]
        with closing(sqlite3.connect(directory / filename)) as conn:
            conn.execute(f"CREATE TABLE {mapping.relation} ({columns})")
            placeholders = ", ".join("?" for _ in rows[0])
            conn.executemany(
                f"INSERT INTO {mapping.relation} VALUES ({placeholders})",  # noqa: S608 - fixed demo schema
                rows,
            )
            create_fts5_index(conn, mapping)
            conn.commit()


def demo_providers(directory: Path, snapshot: ConfigSnapshot) -> dict[str, SqliteFts5Provider]:
    """Return one read-only FTS5 provider per demo source, keyed by source id."""
    return {
        source.id: SqliteFts5Provider(
            directory / source.connection_ref, mappings=snapshot.mappings_of(source.id)
        )
        for source in snapshot.sources
    }
