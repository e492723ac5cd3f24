"""Seed the real-data tables into SQLite, PostgreSQL and MariaDB, once per data version.

Every engine gets the same four relations with the same columns and rows (``_data.py``)
and, for every mapping of the shared configuration (``_config.py``), the engine's own
full-text index through the project's helper for it:

- SQLite: a file, indexed by ``esra.sqlite.create_fts5_index`` (FTS5, ``unicode61``);
- PostgreSQL: the schema ``esra_realdata``, indexed by ``esra.postgres.create_text_index``
  (a stored generated ``tsvector`` column with a GIN index, ``english`` configuration);
- MariaDB: the database ``esra_realdata``, indexed by ``esra.mysql.create_fulltext_index``
  (an InnoDB FULLTEXT index).

Idempotent: each target records the data version it was built from in a one-row table
``esra_seed``; a target already at the current version is left alone (a few milliseconds),
anything else is dropped and rebuilt (SQLite into a temporary file renamed into place,
PostgreSQL in one transaction, MariaDB with the version row written last). Concurrent
seeders of one server serialise on an advisory lock.

Run it directly to seed ahead of the tests (``python -m tests.realdata.seed --help``).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import sqlite3
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import closing
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.dialects.mysql.pymysql import MySQLDialect_pymysql

from esra.core._config.mapping import Mapping
from esra.sqlite import create_fts5_index
from tests.realdata._config import realdata_snapshot
from tests.realdata._data import ColumnKind, RealData, Table, load_real_data

__all__ = [
    "MYSQL_DATABASE",
    "PG_SCHEMA",
    "PG_TEXT_SEARCH_CONFIG",
    "find_attribute",
    "mysql_connect",
    "mysql_database_dsn",
    "mysql_helper",
    "postgres_helper",
    "seed_mysql",
    "seed_postgres",
    "seed_sqlite",
]

PG_SCHEMA = "esra_realdata"
PG_TEXT_SEARCH_CONFIG = "english"
MYSQL_DATABASE = "esra_realdata"
_SEED_TABLE = "esra_seed"
_LOCK_NAME = "esra_realdata_seed"

_TYPES: dict[str, dict[ColumnKind, str]] = {
    "sqlite": {
        ColumnKind.INTEGER: "INTEGER",
        ColumnKind.TEXT: "TEXT",
        ColumnKind.MONEY: "REAL",
        ColumnKind.DATE: "TEXT",
    },
    "postgres": {
        ColumnKind.INTEGER: "integer",
        ColumnKind.TEXT: "text",
        ColumnKind.MONEY: "numeric(12,2)",
        ColumnKind.DATE: "date",
    },
    "mysql": {
        ColumnKind.INTEGER: "INT",
        ColumnKind.TEXT: "TEXT",
        ColumnKind.MONEY: "DECIMAL(12,2)",
        ColumnKind.DATE: "DATE",
    },
}
_QUOTE: dict[str, Callable[[str], str]] = {
    "sqlite": sqlite_dialect.dialect().identifier_preparer.quote_identifier,
    "postgres": lambda name: '"' + name.replace('"', '""') + '"',
    "mysql": MySQLDialect_pymysql().identifier_preparer.quote_identifier,
}


def _create_table(engine: str, table: Table, *, qualifier: str = "") -> str:
    quote = _QUOTE[engine]
    columns = ", ".join(f"{quote(c.name)} {_TYPES[engine][c.kind]}" for c in table.columns)
    suffix = " ENGINE=InnoDB" if engine == "mysql" else ""
    return (
        f"CREATE TABLE {qualifier}{quote(table.name)} "
        f"({columns}, PRIMARY KEY ({quote(table.key)})){suffix}"
    )


def _insert(engine: str, table: Table, placeholder: str, *, qualifier: str = "") -> str:
    quote = _QUOTE[engine]
    names = ", ".join(quote(c.name) for c in table.columns)
    values = ", ".join(placeholder for _ in table.columns)
    # Table and column names are this module's fixed identifiers, quoted by the dialect.
    return f"INSERT INTO {qualifier}{quote(table.name)} ({names}) VALUES ({values})"


def _sqlite_value(value: object) -> object:
    # SQLite has no decimal type: money is stored as REAL, as an application would.
    return float(value) if isinstance(value, Decimal) else value


# --- SQLite ---------------------------------------------------------------------------------


def _sqlite_version(path: Path) -> str | None:
    if not path.exists():
        return None
    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as connection:
            row = connection.execute(f"SELECT version FROM {_SEED_TABLE}").fetchone()
    except sqlite3.Error:
        return None
    return str(row[0]) if row else None


def seed_sqlite(path: Path, data: RealData, mappings: Sequence[Mapping]) -> bool:
    """Build the SQLite file at ``path`` unless it is at ``data.version``; True if built."""
    if _sqlite_version(path) == data.version:
        return False
    building = path.with_name(f"{path.name}.{os.getpid()}.building")
    building.unlink(missing_ok=True)
    with closing(sqlite3.connect(building)) as connection:
        for table in data.tables:
            connection.execute(_create_table("sqlite", table))
            connection.executemany(
                _insert("sqlite", table, "?"),
                [tuple(_sqlite_value(v) for v in row) for row in table.rows],
            )
        connection.commit()
        for mapping in mappings:
            create_fts5_index(connection, mapping)
        connection.execute(f"CREATE TABLE {_SEED_TABLE} (version TEXT NOT NULL)")
        connection.execute(f"INSERT INTO {_SEED_TABLE} VALUES (?)", (data.version,))
        connection.commit()
    building.replace(path)
    return True


# --- PostgreSQL -----------------------------------------------------------------------------


def find_attribute(name: str, *modules: str) -> Any:
    """``name`` from the first of ``modules`` that imports and defines it, else None.

    The package is tried first; its defining submodule second, so the suite can run while
    a distribution's ``__init__`` does not re-export it yet.
    """
    for module in modules:
        try:
            found = getattr(importlib.import_module(module), name, None)
        except ImportError:
            continue
        if found is not None:
            return found
    return None


def postgres_helper() -> Callable[..., Any] | None:
    """``esra.postgres.create_text_index`` if that distribution is present, else None."""
    helper = find_attribute("create_text_index", "esra.postgres", "esra.postgres._index")
    return helper if callable(helper) else None


def seed_postgres(
    dsn: str, data: RealData, mappings: Sequence[Mapping], *, schema_name: str = PG_SCHEMA
) -> bool:
    """Build schema ``schema_name`` unless it is at ``data.version``; True if built.

    Without ``esra.postgres.create_text_index`` the tables are seeded unindexed (and marked
    so, to be rebuilt with their indexes once the helper is there). The helper is async, so
    this runs on its own event loop: call it from synchronous code only.
    """
    return asyncio.run(_seed_postgres(dsn, data, mappings, schema_name))


async def _seed_postgres(
    dsn: str, data: RealData, mappings: Sequence[Mapping], schema_name: str
) -> bool:
    import psycopg
    from psycopg import sql

    create_text_index = postgres_helper()
    version = data.version if create_text_index else f"{data.version}+unindexed"
    schema = sql.Identifier(schema_name)
    seed_table = sql.Identifier(_SEED_TABLE)
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as connection:
        await connection.execute("SELECT pg_advisory_lock(hashtext(%s))", (_LOCK_NAME,))
        try:
            cursor = await connection.execute(
                "SELECT to_regclass(%s) IS NOT NULL", (f"{schema_name}.{_SEED_TABLE}",)
            )
            found = await cursor.fetchone()
            if found and found[0]:
                query = sql.SQL("SELECT version FROM {}.{}").format(schema, seed_table)
                row = await (await connection.execute(query)).fetchone()
                if row and row[0] == version:
                    return False
            async with connection.transaction():
                await connection.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(schema))
                await connection.execute(sql.SQL("CREATE SCHEMA {}").format(schema))
                await connection.execute(sql.SQL("SET LOCAL search_path TO {}").format(schema))
                for table in data.tables:
                    # bytes: the DDL is built from this module's fixed identifiers, quoted.
                    await connection.execute(_create_table("postgres", table).encode())
                    names = sql.SQL(", ").join(sql.Identifier(c.name) for c in table.columns)
                    copy = sql.SQL("COPY {} ({}) FROM STDIN").format(
                        sql.Identifier(table.name), names
                    )
                    async with connection.cursor() as writer, writer.copy(copy) as stream:
                        for values in table.rows:
                            await stream.write_row(values)
                if create_text_index is not None:
                    for mapping in mappings:
                        await create_text_index(connection, mapping, PG_TEXT_SEARCH_CONFIG)
                await connection.execute(
                    sql.SQL("CREATE TABLE {} (version text NOT NULL)").format(seed_table)
                )
                await connection.execute(
                    sql.SQL("INSERT INTO {} VALUES (%s)").format(seed_table), (version,)
                )
                await connection.execute("ANALYZE")
        finally:
            await connection.execute("SELECT pg_advisory_unlock(hashtext(%s))", (_LOCK_NAME,))
    return True


# --- MariaDB / MySQL ------------------------------------------------------------------------


def mysql_helper() -> Callable[..., Any] | None:
    """``esra.mysql.create_fulltext_index`` if that distribution is present, else None."""
    helper = find_attribute("create_fulltext_index", "esra.mysql", "esra.mysql._index")
    return helper if callable(helper) else None


def mysql_database_dsn(dsn: str, database: str = MYSQL_DATABASE) -> str:
    """``dsn`` with its database replaced by ``database`` (the seeded one)."""
    parts = urlsplit(dsn)
    return urlunsplit((parts.scheme, parts.netloc, f"/{database}", parts.query, ""))


def mysql_connect(dsn: str) -> Any:
    import pymysql

    parts = urlsplit(dsn)
    return pymysql.connect(
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 3306,
        user=unquote(parts.username or "root"),
        password=unquote(parts.password or ""),
        charset="utf8mb4",
        autocommit=True,
    )


def seed_mysql(
    dsn: str, data: RealData, mappings: Sequence[Mapping], *, database_name: str = MYSQL_DATABASE
) -> bool:
    """Build database ``database_name`` unless it is at ``data.version``; True if built.

    Without ``esra.mysql.create_fulltext_index`` the tables are seeded unindexed (and marked
    so, to be rebuilt with their indexes once the helper is there).
    """
    import pymysql

    create_fulltext_index = mysql_helper()
    version = data.version if create_fulltext_index else f"{data.version}+unindexed"
    quote = _QUOTE["mysql"]
    database = quote(database_name)
    connection = mysql_connect(dsn)
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT GET_LOCK(%s, 120)", (_LOCK_NAME,))
            try:
                try:
                    cursor.execute(f"SELECT version FROM {database}.{quote(_SEED_TABLE)}")
                    row = cursor.fetchone()
                except pymysql.err.ProgrammingError:
                    row = None  # no such database or table yet
                if row and row[0] == version:
                    return False
                # MariaDB DDL is not transactional: the version row goes in last, so an
                # interrupted build is simply rebuilt next time.
                cursor.execute(f"DROP DATABASE IF EXISTS {database}")
                cursor.execute(
                    f"CREATE DATABASE {database} CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
                )
                cursor.execute(f"USE {database}")
                for table in data.tables:
                    cursor.execute(_create_table("mysql", table))
                    cursor.executemany(_insert("mysql", table, "%s"), list(table.rows))
                if create_fulltext_index is not None:
                    for mapping in mappings:
                        create_fulltext_index(connection, mapping)
                cursor.execute(f"CREATE TABLE {quote(_SEED_TABLE)} (version TEXT NOT NULL)")
                cursor.execute(f"INSERT INTO {quote(_SEED_TABLE)} VALUES (%s)", (version,))
            finally:
                cursor.execute("SELECT RELEASE_LOCK(%s)", (_LOCK_NAME,))
    finally:
        connection.close()
    return True


# --- command line ---------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Seed the engines named on the command line and report how long each took."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=None, help="shared data folder")
    parser.add_argument("--sqlite", type=Path, help="SQLite file to build")
    parser.add_argument("--postgres", help="PostgreSQL DSN (schema esra_realdata)")
    parser.add_argument("--mysql", help="MariaDB/MySQL DSN (database esra_realdata)")
    args = parser.parse_args(argv)
    root = args.data or Path(
        os.environ.get("ESRA_SHARED_DATA") or Path(__file__).resolve().parents[3] / "shared/data"
    )
    started = time.perf_counter()
    data = load_real_data(root)
    mappings = realdata_snapshot().mappings
    out = sys.stdout
    out.write(f"data {data.version} parsed in {time.perf_counter() - started:.2f}s\n")
    jobs: list[tuple[str, Callable[[], bool]]] = []
    if args.sqlite:
        jobs.append(("sqlite", lambda: seed_sqlite(args.sqlite, data, mappings)))
    if args.postgres:
        jobs.append(("postgres", lambda: seed_postgres(args.postgres, data, mappings)))
    if args.mysql:
        jobs.append(("mysql", lambda: seed_mysql(args.mysql, data, mappings)))
    for name, job in jobs:
        started = time.perf_counter()
        built = job()
        state = "built" if built else "already current"
        out.write(f"{name}: {state} in {time.perf_counter() - started:.2f}s\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
