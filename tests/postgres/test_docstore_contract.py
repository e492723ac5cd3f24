"""The ``DocumentRepository`` contract suite against ``PostgresDocumentRepository``.

Every repository the suite opens lives in its own freshly applied store schema
(``esra_test_store_<random>``), dropped when the repository is closed.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from esra.core._docstore.repository import DocumentRepository
from esra.core.testing.docstore_contract import DocumentRepositoryContract
from esra.core.testing.docstore_ownership_contract import VersionOneDocument
from esra.postgres import PostgresDocumentRepository, apply_store_schema
from tests.postgres._docstore_v1 import create_version_1_store

pytestmark = [pytest.mark.postgres, pytest.mark.integration]


class _SchemaRepository(PostgresDocumentRepository):
    """Drops its private schema on close."""

    dsn: str
    schema_name: str

    async def close(self) -> None:
        await super().close()
        async with await psycopg.AsyncConnection.connect(self.dsn, autocommit=True) as conn:
            await conn.execute(
                sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(self.schema_name))
            )


class TestPostgresDocumentRepositoryContract(DocumentRepositoryContract):
    """Every rule of the port, on PostgreSQL."""

    @pytest.fixture(autouse=True)
    def _dsn(self, pg_dsn: str) -> None:
        self.dsn = pg_dsn

    async def make_repository(self, tmp_path: Path, *, retain_bytes: bool) -> DocumentRepository:
        """A repository over a new, empty store schema."""
        del tmp_path
        schema = f"esra_test_store_{uuid.uuid4().hex[:12]}"
        async with await psycopg.AsyncConnection.connect(self.dsn, autocommit=True) as conn:
            await apply_store_schema(conn, schema, "simple")
        repository = await _SchemaRepository.open(
            self.dsn, schema=schema, retain_bytes=retain_bytes, max_size=2
        )
        repository.dsn, repository.schema_name = self.dsn, schema
        return repository

    async def make_twin(self, repository: DocumentRepository) -> DocumentRepository:
        """Another pool on ``repository``'s schema (as another host opens it)."""
        assert isinstance(repository, _SchemaRepository)
        return await PostgresDocumentRepository.open(
            self.dsn, schema=repository.schema_name, max_size=2
        )

    async def make_migrated_repository(
        self, tmp_path: Path, legacy: VersionOneDocument
    ) -> DocumentRepository:
        """A version-1 store schema holding ``legacy``, migrated by ``apply_store_schema``."""
        del tmp_path
        schema = f"esra_test_store_{uuid.uuid4().hex[:12]}"
        async with await psycopg.AsyncConnection.connect(self.dsn, autocommit=True) as conn:
            await create_version_1_store(conn, schema, legacy)
            assert await apply_store_schema(conn, schema, "simple")
        repository = await _SchemaRepository.open(self.dsn, schema=schema, max_size=2)
        repository.dsn, repository.schema_name = self.dsn, schema
        return repository
