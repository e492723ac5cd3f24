"""A host with the admin API over tenant A's SQLite document store, for the admin tests.

Tenant A has a store (a fresh database file: the store starts Disabled unless the test asks
for it initialised); tenant B has none. Tokens come from the test issuer with the roles a
test names in ``esra_roles``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import attrs
import httpx2
from starlette.applications import Starlette

from esra.core._docstore.ingestion import IngestionWorker, TenantTurn
from esra.core._fetch.tokens import Keyring
from esra.core._static_config import StaticConfigRepository
from esra.core.testing import FakeClock, FakeLanguageModel, InMemoryAuditSink
from esra.core.testing._provider import InMemorySearchProvider
from esra.sqlite import SqliteDocumentRepository
from esra.starlette._admin import AdminLimits
from esra.starlette._app import create_app
from esra.starlette._stores import TenantStore, open_tenant_stores
from tests.starlette._tokens import AUDIENCE, NOW, idp, other_idp
from tests.starlette._world import BASE, ROWS, TENANT_A, TENANT_B, snapshot_a, snapshot_b

__all__ = ["ADMIN", "AdminHost", "open_admin_host", "token"]

ADMIN = f"{BASE}/admin/v1"


def token(*roles: str, tenant: str = TENANT_A, subject: str = "operator") -> str:
    """A valid token of ``tenant`` holding ``roles`` (tenant B's from its own issuer)."""
    issuer = idp() if tenant == TENANT_A else other_idp()
    return issuer.token(sub=subject, esra_tenant=tenant, esra_roles=list(roles))


@attrs.frozen
class AdminHost:
    """The app, its audit sink and tenant A's store."""

    app: Starlette
    audit: InMemoryAuditSink
    store: TenantStore
    config: StaticConfigRepository
    clock: FakeClock

    def client(self, bearer: str | None) -> httpx2.AsyncClient:
        """An HTTP client reaching the app in-process with ``bearer`` as its token."""
        headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
        return httpx2.AsyncClient(
            transport=httpx2.ASGITransport(app=self.app, raise_app_exceptions=False),
            base_url=BASE,
            headers=headers,
        )

    async def index(self) -> list[TenantTurn]:
        """Run one ingestion turn over the store, as ``esra worker`` would."""
        worker = IngestionWorker(self.store.repository, worker_id="test", clock=self.clock)
        return await worker.run_turn()


@contextlib.asynccontextmanager
async def open_admin_host(
    tmp_path: Path, *, initialised: bool = True, limits: AdminLimits | None = None
) -> AsyncIterator[AdminHost]:
    """Build the host; with ``initialised`` tenant A's store is Ready from the start."""
    database = tmp_path / "store.db"
    if initialised:
        repository = SqliteDocumentRepository(database)
        try:
            await repository.initialize()
        finally:
            await repository.close()
    audit = InMemoryAuditSink()
    clock = FakeClock(NOW)
    config = StaticConfigRepository([snapshot_a(), snapshot_b()])
    providers = {tenant: InMemorySearchProvider({"m-s-1": rows}) for tenant, rows in ROWS.items()}
    async with open_tenant_stores({TENANT_A: database}, audit=audit, clock=clock) as stores:
        app = create_app(
            config=config,
            providers={tenant: {"s-1": provider} for tenant, provider in providers.items()},
            model=FakeLanguageModel(),
            audit=audit,
            issuers=[idp().trusted(), other_idp().trusted(tenants=(TENANT_B,))],
            resource_url=AUDIENCE,
            keyring=Keyring.generate(),
            clock=clock,
            document_stores=stores,
            publisher=config,
            admin_limits=limits,
        )
        async with app.router.lifespan_context(app):
            yield AdminHost(
                app=app, audit=audit, store=stores[TENANT_A], config=config, clock=clock
            )


def files(*named: tuple[str, bytes]) -> list[tuple[str, tuple[str | None, bytes, str | None]]]:
    """Multipart parts for ``httpx``: each file under the field ``files``."""
    return [("files", (name, data, "application/octet-stream")) for name, data in named]
