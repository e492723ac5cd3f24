"""``/readyz``: the host's parts answer, each within its bound, or 503 naming which did not.

The embedded default (SQLite state database, SQLite document store, SQLite audit log) is
ready; a part that hangs or fails is named with a classified word, never its error's text.
The PostgreSQL cases are in ``tests/postgres/test_readiness_postgres.py``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import cast

import pytest
from starlette.applications import Starlette
from starlette.routing import Route

from esra.core._admin.store import WorkspaceStore
from esra.core._audit.batching import BatchingAuditSink
from esra.core._clock import SystemClock
from esra.core._static_config import StaticConfigRepository
from esra.core.testing import FakeLanguageModel, InMemoryAuditSink
from esra.sqlite import SqliteDocumentRepository
from esra.starlette._app import create_app
from esra.starlette._embedded import STORE_FILE
from esra.starlette._host import build_app
from esra.starlette._parts import open_embedded
from esra.starlette._readiness import ReadinessCheck, readiness_endpoint, run_check
from esra.starlette._stores import open_tenant_stores
from tests.starlette._tokens import AUDIENCE, idp
from tests.starlette._world import http

DSN_TEXT = "postgresql://esra_owner:hunter2@db.internal:5432/esra"


class _Workspaces:
    """A configuration database whose ``ping`` is scripted."""

    def __init__(self, failure: BaseException | None = None, *, hang: bool = False) -> None:
        self._failure = failure
        self._hang = hang

    async def ping(self) -> None:
        if self._hang:
            await asyncio.Event().wait()
        if self._failure is not None:
            raise self._failure


async def test_the_embedded_host_is_ready_without_a_token_whatever_its_host_header(
    tmp_path: Path,
) -> None:
    """State database, the (initialised) document store and the audit log all answer."""
    store = SqliteDocumentRepository(tmp_path / STORE_FILE)
    await store.initialize()
    await store.close()
    async with (
        open_embedded(tmp_path) as parts,
        open_tenant_stores(parts.stores, audit=parts.audit, clock=SystemClock()) as stores,
    ):
        assert isinstance(parts.audit, BatchingAuditSink)
        app = build_app(parts, host="127.0.0.1", port=8000, stores=stores)
        async with app.router.lifespan_context(app), http(app) as client:
            ready = await client.get("/readyz")
            foreign = await client.get("/readyz", headers={"Host": "10.0.0.7:8000"})
    assert ready.status_code == 200
    assert ready.headers["cache-control"] == "no-store"
    assert ready.json() == {
        "status": "ready",
        "checks": {"config_database": "ok", "document_stores": "ok", "audit": "ok"},
    }
    assert foreign.status_code == 200  # probes address an instance by IP, as for /healthz


def _app(workspaces: _Workspaces) -> Starlette:
    return create_app(
        config=StaticConfigRepository(),
        providers={},
        model=FakeLanguageModel(),
        audit=InMemoryAuditSink(),
        issuers=[idp().trusted()],
        resource_url=AUDIENCE,
        # Readiness uses only its ping(): the workspace store's other methods are not called.
        workspaces=cast("WorkspaceStore", workspaces),
    )


async def test_a_failing_config_database_is_503_naming_it_and_no_error_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The probe raises with a DSN in its message: the answer and the log name the check
    and the error's type only."""
    app = _app(_Workspaces(OSError(f"could not connect to {DSN_TEXT}")))
    async with http(app) as client:
        response = await client.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {"status": "not_ready", "checks": {"config_database": "unavailable"}}
    for text in (response.text, caplog.text):
        assert "hunter2" not in text
        assert "db.internal" not in text
    assert "config_database" in caplog.text
    assert "OSError" in caplog.text


async def test_a_check_that_does_not_answer_in_time_is_a_timeout() -> None:
    """A hanging part is cut off at the bound and reported as ``timeout``; the others are
    still asked and answered."""

    async def fine() -> None:
        return None

    checks = [
        ReadinessCheck("config_database", _Workspaces(hang=True).ping),
        ReadinessCheck("audit", fine),
    ]
    assert await run_check(checks[0], timeout_s=0.01) == "timeout"
    app = Starlette(routes=[Route("/readyz", readiness_endpoint(checks, timeout_s=0.01))])
    async with http(app) as client:
        response = await client.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {
        "status": "not_ready",
        "checks": {"config_database": "timeout", "audit": "ok"},
    }


async def test_an_unavailable_audit_sink_is_not_ready() -> None:
    """A batching sink that refuses records (or is closing) fails its check."""

    class _Log:
        async def write_batch(self, records: object) -> None:
            return None

    sink = BatchingAuditSink(_Log())
    check = ReadinessCheck("audit", sink.ping)
    assert await run_check(check) == "ok"
    await sink.aclose()
    assert await run_check(check) == "unavailable"
