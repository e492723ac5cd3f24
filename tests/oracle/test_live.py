"""Live Oracle suite: runs only where ``ESRA_TEST_ORACLE_DSN`` names a server.

The DSN is an administrator URL for a pluggable database with Oracle Text, e.g.
``oracle://system:Passw0rd@127.0.0.1:1521/FREEPDB1`` (``gvenzl/oracle-free`` image; see
docs/providers-sqlserver-oracle.md). The fixture creates an owner schema with the contract
table and its CONTEXT index, and a reader user with SELECT only; the provider connects as
the reader with ``current_schema`` set to the owner. Both users are dropped afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import oracledb
import pytest

from esra.core._config.mapping import FieldType
from esra.core._config.source import SourceHealth
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
from esra.oracle import OracleTextProvider, text_index_statements
from tests._databases import require_dsn
from tests._external import load_sqli_payloads

pytestmark = [pytest.mark.integration, pytest.mark.oracle]

_TYPES = {
    FieldType.TEXT: "VARCHAR2(400)",
    FieldType.INTEGER: "NUMBER(10)",
    FieldType.NUMBER: "BINARY_DOUBLE",
    FieldType.BOOLEAN: "NUMBER(1)",
    FieldType.DATE: "DATE",
}


class Server:
    """Admin parameters and the two users this run created."""

    def __init__(self, dsn: str) -> None:
        parts = urlsplit(dsn)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 1521
        self.service = parts.path.lstrip("/")
        self.admin = (unquote(parts.username or "system"), unquote(parts.password or ""))
        self.owner = f"ESRA_TEST_ORACLE_{os.getpid()}"
        self.reader = f"ESRA_READER_{uuid.uuid4().hex[:8].upper()}"
        self.password = "Pw" + uuid.uuid4().hex[:20]

    def connect(self, user: str | None = None) -> oracledb.Connection:
        name, password = (user, self.password) if user else self.admin
        return oracledb.connect(
            user=name, password=password, host=self.host, port=self.port,
            service_name=self.service,
        )  # fmt: skip

    def provider(self, **kwargs: Any) -> OracleTextProvider:
        tenant = CONTRACT_MAPPING.tenant_id
        return OracleTextProvider(
            tenant_id=tenant,
            connection=f"oracle://{self.reader}:${{secret:pw}}@{self.host}:{self.port}/{self.service}",
            secrets=InMemorySecretStore({(tenant, "pw"): self.password}),
            allowlist=StaticHostAllowlist([(tenant, self.host, self.port)]),
            mappings=(CONTRACT_MAPPING,),
            current_schema=self.owner,
            **kwargs,
        )

    def count(self) -> int:
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(f'SELECT COUNT(*) FROM "{self.owner}".contract_articles')
            row = cur.fetchone()
            return int(row[0]) if row else -1


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    """An owner schema with the contract table and CONTEXT index, and a SELECT-only reader."""
    srv = Server(require_dsn("ESRA_TEST_ORACLE_DSN"))
    with srv.connect() as conn, conn.cursor() as cur:
        for user in (srv.owner, srv.reader):
            cur.execute(
                f'CREATE USER "{user}" IDENTIFIED BY "{srv.password}" QUOTA UNLIMITED ON USERS'
            )
            cur.execute(f'GRANT CREATE SESSION TO "{user}"')
        cur.execute(f'GRANT CREATE TABLE, CTXAPP TO "{srv.owner}"')
        cur.execute(f'GRANT EXECUTE ON CTXSYS.CTX_DDL TO "{srv.owner}"')
    with srv.connect(srv.owner) as conn, conn.cursor() as cur:
        cols = ", ".join(
            f'"{name.upper() if name.islower() else name}" '
            f"{'VARCHAR2(40) PRIMARY KEY' if name == 'art_key' else _TYPES[kind]}"
            for name, kind in CONTRACT_COLUMNS
        )
        cur.execute(f"CREATE TABLE contract_articles ({cols})")
        names = [name for name, _ in CONTRACT_COLUMNS]
        quoted = ", ".join(f'"{n.upper() if n.islower() else n}"' for n in names)
        marks = ", ".join(f":{i + 1}" for i in range(len(names)))
        rows = [
            tuple(
                date.fromisoformat(str(row[n])) if n == "art_published" else row[n] for n in names
            )
            for row in CONTRACT_ROWS
        ]
        cur.executemany(f"INSERT INTO contract_articles ({quoted}) VALUES ({marks})", rows)
        conn.commit()
        for statement in text_index_statements(CONTRACT_MAPPING):
            cur.execute(statement)
        cur.execute(f'GRANT SELECT ON contract_articles TO "{srv.reader}"')
    yield srv
    with srv.connect() as conn, conn.cursor() as cur:
        for user in (srv.reader, srv.owner):
            cur.execute(f'DROP USER "{user}" CASCADE')


class TestOracleTextProviderContract(SearchProviderContract):
    """Oracle Text honours every rule of the provider contract."""

    @pytest.fixture(autouse=True)
    def _server(self, server: Server) -> None:
        self.srv = server

    def make_provider(self, dataset: ContractDataset, tmp_path: Path) -> SearchProvider:
        """The module's seeded schema, searched through the reader user."""
        return self.srv.provider()

    def close_provider(self, provider: SearchProvider) -> None:
        """Providers close asynchronously; the pool's threads end on their own."""
        assert isinstance(provider, OracleTextProvider)
        provider._engine._pool.close()


async def test_health_reports_the_context_index(server: Server) -> None:
    """A reachable database whose mapping's CONTEXT index is valid is HEALTHY."""
    p = server.provider()
    try:
        assert await p.health() is SourceHealth.HEALTHY
    finally:
        await p.close()


async def test_a_write_inside_the_read_only_transaction_fails(server: Server) -> None:
    """Read-only is proven: after SET TRANSACTION READ ONLY an INSERT is refused."""
    p = server.provider()
    before = server.count()

    def write(connection: oracledb.Connection) -> list[Any]:
        cursor = connection.cursor()
        try:
            cursor.execute("SET TRANSACTION READ ONLY")
            cursor.execute("INSERT INTO contract_articles (art_key) VALUES ('zz')")
        finally:
            connection.rollback()
        return []

    try:
        await p.connection_kwargs()
        with pytest.raises(ProviderError) as raised:
            await p._engine._runner.run(write, 10.0, "write-probe")
        assert raised.value.code is ProviderErrorCode.PERMISSION_DENIED
    finally:
        await p.close()
    assert server.count() == before


@pytest.mark.external_data
async def test_every_payload_executes_inertly(server: Server) -> None:
    """Each payload as a term and as filter/claim values: classified or in scope, no writes."""
    from tests.oracle.test_injection import _query

    p = server.provider(pool_size=2)
    before = server.count()
    unclassified: list[str] = []
    keys = {str(r["art_key"]) for r in CONTRACT_ROWS}
    try:
        for payload in load_sqli_payloads():
            for query in (_query(optional=payload), _query(value=payload, claim=payload)):
                try:
                    rows = await p.execute(query, timeout_s=10.0)
                except ProviderError as exc:
                    if exc.code is ProviderErrorCode.UNKNOWN:
                        unclassified.append(payload)
                    continue
                assert {row.key for row in rows} <= keys
    finally:
        await p.close()
    assert unclassified == []
    assert server.count() == before
