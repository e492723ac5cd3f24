"""The claim fence on SQLite: a version-3 store gains ``claim_seq`` in place, and a claim
from before a re-index cannot write over the current claim's result on the migrated store.

The fence itself is proven for every repository by ``ClaimFenceContract`` (part of
``DocumentRepositoryContract``); this is the upgrade of an existing store file.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from esra.sqlite import SqliteDocumentRepository
from esra.sqlite._docstore_schema import (
    STORE_SCHEMA_VERSION,
    apply_store_schema,
    store_schema_statements,
    store_schema_version,
)
from esra.sqlite._schema_migrations import apply_migrations
from tests._claim_fence import T0, TENANT, assert_fenced_across_a_reindex


def _create_version_3_store(database: Path) -> None:
    """A store file at version 3 (as the ESRA before the claim fence left it), one Pending
    document in it."""
    with closing(sqlite3.connect(database, isolation_level=None)) as connection:
        migrations = {v: store_schema_statements(v) for v in (1, 2, 3)}
        apply_migrations(
            connection,
            version_table="store_schema",
            migrations=migrations,
            target=3,
            subject="store's",
        )
        stamp = T0.isoformat(timespec="microseconds")
        connection.execute(
            "INSERT INTO store_documents (id, tenant_id, title, format, sha256, size, scope, "
            "state, created_at, updated_at, original) "
            "VALUES ('legacy', ?, 'a.txt', 'txt', 'h', 5, 'all', 'pending', ?, ?, ?)",
            (TENANT, stamp, stamp, b"hello"),
        )


async def test_a_version_3_store_gains_the_claim_counter_and_keeps_its_documents(
    tmp_path: Path,
) -> None:
    """v3 → v4 adds ``claim_seq`` (0 for every existing row) once; the fence then holds on
    a document stored before the upgrade."""
    database = tmp_path / "store.db"
    _create_version_3_store(database)
    with closing(sqlite3.connect(database, isolation_level=None)) as connection:
        assert store_schema_version(connection) == 3
        assert apply_store_schema(connection) == STORE_SCHEMA_VERSION == 4
        assert apply_store_schema(connection) == 4
        versions = connection.execute("SELECT version FROM store_schema ORDER BY version")
        assert [v for (v,) in versions] == [1, 2, 3, 4]
        rows = connection.execute("SELECT id, state, attempts, claim_seq FROM store_documents")
        assert rows.fetchall() == [("legacy", "pending", 0, 0)]

    repository = SqliteDocumentRepository(database)
    assert await repository.initialize() == 4
    try:
        await assert_fenced_across_a_reindex(repository, "legacy")
    finally:
        await repository.close()
