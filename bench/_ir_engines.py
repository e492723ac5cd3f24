"""The retrieval-quality bench's engines: one collection loaded, indexed and served by each.

Every engine holds the collection as one table ``qxdocs`` (``qxkey``, ``qxtitle``, ``qxbody``)
behind one mapping whose business fields carry the same names. The names are made of a
non-word prefix on purpose: the LocalModel returns only the fields a request names, and a
field named ``body``, ``text`` or ``title`` would be "named" by questions about bodies of
revolution, text retrieval or descriptive titles, cutting the key from their results. The key
field is always returnable, so any projection can carry it.

- **sqlite**: a temporary database file, the FTS5 index of ``esra.sqlite.create_fts5_index``
  (with the adapter's ``DEFAULT_TOKENIZE`` unless ``--sqlite-tokenize`` names another), read
  through ``SqliteFts5Provider``.
- **postgres** (``ESRA_TEST_POSTGRES_DSN``): a private schema ``esra_bench_<name>_<pid>``,
  the generated tsvector column and GIN index of ``esra.postgres.create_text_index``
  (``english``), read through ``PostgresProvider``; the schema is dropped afterwards.
- **mariadb** (``ESRA_TEST_MYSQL_DSN``): a private database ``esra_bench_<name>_<pid>``
  (utf8mb4, InnoDB), the FULLTEXT index of ``esra.mysql.create_fulltext_index``, read through
  ``MySqlProvider``; the database is dropped afterwards.

The administrative work (DDL, loading) runs over connections of the bench's own; the
providers only read. A password in a DSN reaches the providers through a secret reference.
"""

from __future__ import annotations

import os
import re
import sqlite3
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, closing
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

import attrs
import mysql.connector
import psycopg
from mysql.connector.connection import MySQLConnection
from psycopg import sql

from bench._ir_collections import Collection
from esra.core.config import DefaultTemplate, FieldSpec, Mapping
from esra.core.ports import SearchProvider
from esra.core.testing import InMemorySecretStore, StaticHostAllowlist
from esra.mysql import MySqlProvider, create_fulltext_index
from esra.postgres import PostgresProvider, create_text_index
from esra.sqlite import DEFAULT_TOKENIZE, SqliteFts5Provider, create_fts5_index

__all__ = [
    "BODY_FIELD",
    "DEPTH",
    "ENGINES",
    "FIELD_WORDS",
    "KEY_FIELD",
    "SOURCE",
    "TENANT",
    "TITLE_FIELD",
    "Engine",
    "EngineSetup",
    "mariadb_engine",
    "mariadb_reachable",
    "postgres_engine",
    "postgres_reachable",
    "sqlite_engine",
]

TENANT = "bench"
SOURCE = "collection"
DEPTH = 100
ENGINES = ("sqlite", "postgres", "mariadb")
TABLE = "qxdocs"
TEXT_INDEX = "qxdocs_fts"
KEY_FIELD = "qxkey"
TITLE_FIELD = "qxtitle"
BODY_FIELD = "qxbody"
# The words a planner could read in the field names (split as the LocalModel splits them).
FIELD_WORDS = frozenset({KEY_FIELD, TITLE_FIELD, BODY_FIELD})


@attrs.frozen
class Engine:
    """A loaded, indexed collection and the provider that searches it."""

    name: str
    provider_kind: str
    provider: SearchProvider
    mapping: Mapping


EngineSetup = Callable[[Collection], AbstractAsyncContextManager[Engine]]


def _mapping(collection: Collection, schema: str | None = None) -> Mapping:
    return Mapping(
        id="documents",
        tenant_id=TENANT,
        source_id=SOURCE,
        business_name=f"{collection.name} documents",
        description=f"The documents of the {collection.name} test collection.",
        relation=TABLE,
        schema=schema,
        text_index=TEXT_INDEX,
        record_key=KEY_FIELD,
        title_field=TITLE_FIELD,
        content_fields=(BODY_FIELD,),
        default_template=DefaultTemplate(limit=DEPTH),
        fields=(
            FieldSpec(name=KEY_FIELD, column=KEY_FIELD, is_returnable=True),
            FieldSpec(name=TITLE_FIELD, column=TITLE_FIELD, is_searchable=True, is_returnable=True),
            FieldSpec(name=BODY_FIELD, column=BODY_FIELD, is_searchable=True, is_returnable=True),
        ),
    )


def _rows(collection: Collection) -> list[tuple[str, str, str]]:
    return [(d.key, d.title, d.text) for d in collection.documents]


def _private_name(collection: Collection) -> str:
    """``esra_bench_<name>_<pid>``: the collection name reduced to ``[a-z0-9_]``, bounded."""
    name = re.sub(r"[^a-z0-9_]+", "_", collection.name.lower())[:32]
    return f"esra_bench_{name}_{os.getpid()}"


def _provider_connection(dsn: str, database: str) -> tuple[str, InMemorySecretStore, str, int]:
    """A connection template for ``database`` on ``dsn``'s server (password as a secret)."""
    parts = urlsplit(dsn)
    host = parts.hostname or "127.0.0.1"
    port = parts.port or (5432 if parts.scheme.startswith("postgres") else 3306)
    user = quote(unquote(parts.username or ""), safe="")
    password = unquote(parts.password or "")
    secret = ":${secret:pw}" if password else ""
    who = f"{user}{secret}@" if user else ""
    netloc_host = f"[{host}]" if ":" in host else host
    template = f"{parts.scheme}://{who}{netloc_host}:{port}/{database}"
    if parts.query:
        template += f"?{parts.query}"
    return template, InMemorySecretStore({(TENANT, "pw"): password}), host, port


def sqlite_engine(tokenize: str = DEFAULT_TOKENIZE) -> EngineSetup:
    """The collection in a temporary SQLite file with its FTS5 index (``tokenize``)."""

    @asynccontextmanager
    async def setup(collection: Collection) -> AsyncIterator[Engine]:
        mapping = _mapping(collection)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "collection.db"
            with closing(sqlite3.connect(path)) as conn:
                conn.execute(
                    f"CREATE TABLE {TABLE} ({KEY_FIELD} TEXT PRIMARY KEY, {TITLE_FIELD} TEXT, "
                    f"{BODY_FIELD} TEXT)"
                )
                conn.executemany(f"INSERT INTO {TABLE} VALUES (?, ?, ?)", _rows(collection))
                create_fts5_index(conn, mapping, tokenize=tokenize)
                conn.commit()
            provider = SqliteFts5Provider(path, mappings=(mapping,))
            try:
                yield Engine("sqlite", "sqlite", provider, mapping)
            finally:
                provider.close()

    return setup


def postgres_reachable(dsn: str) -> bool:
    """Whether ``dsn`` accepts a connection (a notice is printed when it does not)."""
    try:
        with psycopg.connect(dsn, connect_timeout=5):
            return True
    except psycopg.Error as exc:
        print(f"retrieval_quality: PostgreSQL unreachable ({type(exc).__name__}); skipped")
        return False


def postgres_engine(dsn: str) -> EngineSetup:
    """The collection in a private PostgreSQL schema with an ``english`` tsvector index."""

    @asynccontextmanager
    async def setup(collection: Collection) -> AsyncIterator[Engine]:
        schema = _private_name(collection)
        mapping = _mapping(collection, schema)
        table = sql.Identifier(schema, TABLE)
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            await conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
            try:
                await conn.execute(
                    sql.SQL("CREATE TABLE {} ({} text PRIMARY KEY, {} text, {} text)").format(
                        table,
                        sql.Identifier(KEY_FIELD),
                        sql.Identifier(TITLE_FIELD),
                        sql.Identifier(BODY_FIELD),
                    )
                )
                async with conn.cursor() as cur:
                    await cur.executemany(
                        sql.SQL("INSERT INTO {} VALUES (%s, %s, %s)").format(table),
                        _rows(collection),
                    )
                await create_text_index(conn, mapping, "english")
                await conn.execute(sql.SQL("ANALYZE {}").format(table))
                template, secrets, host, port = _provider_connection(
                    dsn, urlsplit(dsn).path.lstrip("/")
                )
                provider = PostgresProvider(
                    tenant_id=TENANT,
                    connection=template,
                    secrets=secrets,
                    allowlist=StaticHostAllowlist([(TENANT, host, port)]),
                    mappings=(mapping,),
                    text_search_config="english",
                    search_path=schema,
                    pool_size=2,
                )
                try:
                    yield Engine("postgres", "postgres", provider, mapping)
                finally:
                    await provider.close()
            finally:
                await conn.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
                )

    return setup


def _mysql_connect(dsn: str, database: str | None = None) -> MySQLConnection:
    parts = urlsplit(dsn)
    return MySQLConnection(
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 3306,
        user=unquote(parts.username or "root"),
        password=unquote(parts.password or ""),
        database=database,
        charset="utf8mb4",
        autocommit=True,
        connection_timeout=5,
        ssl_disabled=True,
    )


def mariadb_reachable(dsn: str) -> bool:
    """Whether ``dsn`` accepts a connection (a notice is printed when it does not)."""
    try:
        _mysql_connect(dsn).close()
    except mysql.connector.Error as exc:
        print(f"retrieval_quality: MariaDB unreachable ({type(exc).__name__}); skipped")
        return False
    return True


# InnoDB's largest STATS_SAMPLE_PAGES: more leaf pages than any collection here fills.
_ALL_PAGES = 65535


def mariadb_engine(dsn: str) -> EngineSetup:
    """The collection in a private MariaDB / MySQL database with an InnoDB FULLTEXT index."""

    @asynccontextmanager
    async def setup(collection: Collection) -> AsyncIterator[Engine]:
        database = _private_name(collection)
        mapping = _mapping(collection)
        name = f"`{database}`"  # [a-z0-9_] only: no quote character to double
        with closing(_mysql_connect(dsn)) as admin, admin.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {name}")
            cursor.execute(
                f"CREATE DATABASE {name} CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
            )
        try:
            with closing(_mysql_connect(dsn, database)) as conn:
                with conn.cursor() as cursor:
                    # InnoDB's full-text N is its row-count estimate, sampled from
                    # STATS_SAMPLE_PAGES leaf pages: 3,204 CACM rows read 2,998 to 3,364 from
                    # one ANALYZE to the next. Sampling every page makes it the count, and
                    # the ANALYZE below takes it now rather than when the background
                    # recalculation gets to it, so two loads of a collection rank alike.
                    cursor.execute(
                        f"CREATE TABLE {TABLE} ({KEY_FIELD} VARCHAR(64) PRIMARY KEY, "
                        f"{TITLE_FIELD} TEXT, {BODY_FIELD} MEDIUMTEXT) ENGINE=InnoDB "
                        f"STATS_SAMPLE_PAGES={_ALL_PAGES}"
                    )
                with conn.cursor(prepared=True) as cursor:
                    cursor.executemany(f"INSERT INTO {TABLE} VALUES (?, ?, ?)", _rows(collection))
                create_fulltext_index(conn, mapping)
                with conn.cursor() as cursor:
                    cursor.execute(f"ANALYZE TABLE {TABLE}")
                    cursor.fetchall()
            template, secrets, host, port = _provider_connection(dsn, database)
            provider = MySqlProvider(
                tenant_id=TENANT,
                connection=template,
                secrets=secrets,
                allowlist=StaticHostAllowlist([(TENANT, host, port)]),
                mappings=(mapping,),
                pool_size=2,
            )
            try:
                yield Engine("mariadb", "mysql", provider, mapping)
            finally:
                await provider.close()
        finally:
            with closing(_mysql_connect(dsn)) as admin, admin.cursor() as cursor:
                cursor.execute(f"DROP DATABASE IF EXISTS {name}")

    return setup
