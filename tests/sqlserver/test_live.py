"""Live SQL Server suite: runs only where ``ESRA_TEST_SQLSERVER_DSN`` names a server.

The DSN is an administrator URL, e.g. ``mssql://sa:Passw0rd!@127.0.0.1:1433/master``, for a
server with Full-Text Search installed (``mcr.microsoft.com/mssql/server`` plus the
``mssql-server-fts`` package; see docs/providers-sqlserver-oracle.md). The fixture creates
its own database ``esra_test_sqlserver_<pid>`` with the contract table, a full-text catalog
and index, and a ``db_datareader``-only login for the provider, and drops them afterwards.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pymssql
import pytest

from esra.core._config.mapping import FieldType
from esra.core.codes import ProviderErrorCode
from esra.core.exceptions import ProviderError
from esra.core.ports import SearchProvider
from esra.core.testing._fakes import InMemorySecretStore, StaticHostAllowlist
from esra.core.testing.contract import (
    CONTRACT_COLUMNS,
    CONTRACT_MAPPING,
    CONTRACT_ROWS,
    ContractDataset,
    SearchProviderContract,
)
from esra.sqlserver import SqlServerProvider, fulltext_index_statements
from tests._databases import require_dsn
from tests._external import load_sqli_payloads

pytestmark = [pytest.mark.integration, pytest.mark.sqlserver]

_TYPES = {
    FieldType.TEXT: "NVARCHAR(400)",
    FieldType.INTEGER: "INT",
    FieldType.NUMBER: "FLOAT",
    FieldType.BOOLEAN: "BIT",
    FieldType.DATE: "DATE",
}


class Server:
    """The admin connection parameters and the objects this run created."""

    def __init__(self, dsn: str) -> None:
        parts = urlsplit(dsn)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 1433
        self.admin = (unquote(parts.username or "sa"), unquote(parts.password or ""))
        self.database = f"esra_test_sqlserver_{os.getpid()}"
        self.reader = f"esra_reader_{uuid.uuid4().hex[:8]}"
        self.reader_password = "Rd!" + uuid.uuid4().hex

    def connect(self, database: str = "master") -> Any:
        user, password = self.admin
        return pymssql.connect(
            server=self.host, port=str(self.port), user=user, password=password,
            database=database, autocommit=True, login_timeout=10,
        )  # fmt: skip

    def provider(self, **kwargs: Any) -> SqlServerProvider:
        return SqlServerProvider(
            tenant_id=CONTRACT_MAPPING.tenant_id,
            connection=f"mssql://{self.reader}:${{secret:pw}}@{self.host}:{self.port}/{self.database}",
            secrets=InMemorySecretStore({(CONTRACT_MAPPING.tenant_id, "pw"): self.reader_password}),
            allowlist=StaticHostAllowlist([(CONTRACT_MAPPING.tenant_id, self.host, self.port)]),
            mappings=(CONTRACT_MAPPING,),
            **kwargs,
        )

    def counts(self) -> dict[str, int]:
        with self.connect(self.database) as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT t.name, SUM(p.rows) FROM sys.tables t JOIN sys.partitions p "
                "ON p.object_id = t.object_id AND p.index_id IN (0, 1) GROUP BY t.name"
            )
            return {name: int(n) for name, n in cur.fetchall()}


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    """A database with the contract table, its full-text index and a reader login."""
    srv = Server(require_dsn("ESRA_TEST_SQLSERVER_DSN"))
    with srv.connect() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE [{srv.database}]")
        cur.execute(
            f"CREATE LOGIN [{srv.reader}] WITH PASSWORD = N'{srv.reader_password}', "
            "CHECK_POLICY = OFF"
        )
    with srv.connect(srv.database) as conn, conn.cursor() as cur:
        cols = ", ".join(
            f"[{name}] {'NVARCHAR(40) NOT NULL' if name == 'art_key' else _TYPES[kind]}"
            for name, kind in CONTRACT_COLUMNS
        )
        cur.execute(
            f"CREATE TABLE contract_articles ({cols}, CONSTRAINT pk_contract PRIMARY KEY (art_key))"
        )
        names = [name for name, _ in CONTRACT_COLUMNS]
        marks = ", ".join(f"%({i})s" for i in range(len(names)))
        for row in CONTRACT_ROWS:
            cur.execute(
                f"INSERT INTO contract_articles ({', '.join(f'[{n}]' for n in names)}) "
                f"VALUES ({marks})",
                {str(i): row[n] for i, n in enumerate(names)},
            )
        for statement in fulltext_index_statements(CONTRACT_MAPPING, key_index="pk_contract"):
            cur.execute(statement)
        cur.execute(f"CREATE USER [{srv.reader}] FOR LOGIN [{srv.reader}]")
        cur.execute(f"ALTER ROLE db_datareader ADD MEMBER [{srv.reader}]")
        for _ in range(120):  # population is asynchronous
            cur.execute(
                "SELECT FULLTEXTCATALOGPROPERTY('contract_articles_fts', 'PopulateStatus'),"
                " FULLTEXTCATALOGPROPERTY('contract_articles_fts', 'ItemCount')"
            )
            status, items = cur.fetchone()
            if status == 0 and items >= len(CONTRACT_ROWS):
                break
            time.sleep(0.5)
    yield srv
    with srv.connect() as conn, conn.cursor() as cur:
        cur.execute(f"ALTER DATABASE [{srv.database}] SET SINGLE_USER WITH ROLLBACK IMMEDIATE")
        cur.execute(f"DROP DATABASE [{srv.database}]")
        cur.execute(f"DROP LOGIN [{srv.reader}]")


class TestSqlServerProviderContract(SearchProviderContract):
    """SQL Server full-text search honours every rule of the provider contract."""

    @pytest.fixture(autouse=True)
    def _server(self, server: Server) -> None:
        self.srv = server

    def make_provider(self, dataset: ContractDataset, tmp_path: Path) -> SearchProvider:
        """The module's seeded database, searched through the reader login."""
        return self.srv.provider()

    def close_provider(self, provider: SearchProvider) -> None:
        """Providers close asynchronously; the pool's threads end on their own."""
        assert isinstance(provider, SqlServerProvider)
        provider._engine._pool.close()


async def test_health_reports_the_full_text_index(server: Server) -> None:
    """A reachable database whose mapping has an active full-text index is HEALTHY."""
    p = server.provider()
    try:
        from esra.core._config.source import SourceHealth

        assert await p.health() is SourceHealth.HEALTHY
    finally:
        await p.close()


async def test_a_write_over_the_providers_connection_fails(server: Server) -> None:
    """Read-only is proven: an INSERT on the provider's own connection is refused (229)."""
    p = server.provider()
    before = server.counts()

    def write(connection: Any) -> list[Any]:
        cursor = connection.cursor()
        cursor.execute("INSERT INTO contract_articles (art_key) VALUES (N'zz')")
        return []

    try:
        await p.connection_kwargs()
        with pytest.raises(ProviderError) as raised:
            await p._engine._runner.run(write, 10.0, "write-probe")
        assert raised.value.code is ProviderErrorCode.PERMISSION_DENIED
    finally:
        await p.close()
    assert server.counts() == before


@pytest.mark.external_data
async def test_every_payload_executes_inertly(server: Server) -> None:
    """Each payload as a term and as filter/claim values: classified or empty, no writes."""
    from tests.sqlserver.test_injection import _query

    p = server.provider(pool_size=2)
    before = server.counts()
    unclassified: list[str] = []
    try:
        for payload in load_sqli_payloads():
            for query in (_query(optional=payload), _query(value=payload, claim=payload)):
                try:
                    rows = await p.execute(query, timeout_s=10.0)
                except ProviderError as exc:
                    # Over 4,000 UTF-16 code units is refused as SYNTAX_ERROR before sending.
                    if exc.code is ProviderErrorCode.UNKNOWN:
                        unclassified.append(payload)
                    continue
                for row in rows:
                    assert row.key in {str(r["art_key"]) for r in CONTRACT_ROWS}
    finally:
        await p.close()
    assert unclassified == []
    assert server.counts() == before
