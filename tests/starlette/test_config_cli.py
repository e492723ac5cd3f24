"""``esra config import`` / ``export``: the chain's role checks from the command line."""

from __future__ import annotations

import asyncio
import contextlib
import json
from datetime import UTC, datetime
from pathlib import Path

import attrs
import pytest

from esra.core._admin.roles import Role
from esra.core.admin import Administrator, ConnectionSecretService, Grant, InMemorySecretVault
from esra.core.config import dump_snapshot, load_snapshot
from esra.core.testing import FakeClock, InMemoryAuditSink
from esra.core.testing.config_contract import SECRET_REF, contract_snapshot
from esra.sqlite._config_store import SqliteConfigStore
from esra.starlette._admin.operator import DEFAULT_ROLES_CLAIM
from esra.starlette._cli import main
from esra.starlette._config_cli import CONFIG_DATABASE_FILE
from esra.starlette._devtoken import load_or_create_dev_issuer
from esra.starlette._durable_state import embedded_state, open_state
from esra.starlette._embedded import EMBEDDED_CLIENT_APP, EMBEDDED_TENANT


def _token(data_dir: Path, *roles: Role, subject: str = "ops") -> str:
    return load_or_create_dev_issuer(data_dir).mint(
        tenant=EMBEDDED_TENANT,
        subject=subject,
        client_app=EMBEDDED_CLIENT_APP,
        now=datetime.now(UTC),
        claims={DEFAULT_ROLES_CLAIM: tuple(r.value for r in roles)},
        lifetime_s=600,
    )


def _seed_secret(data_dir: Path) -> None:
    """What SECURITY_MANAGE does through the API before anything can be modelled."""

    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)

    async def seed() -> None:
        store = SqliteConfigStore(data_dir / CONFIG_DATABASE_FILE)
        try:
            security = Administrator.of("sec", Grant(Role.SECURITY_MANAGE, EMBEDDED_TENANT))
            service = ConnectionSecretService(
                store, InMemorySecretVault(), audit=InMemoryAuditSink(), clock=FakeClock()
            )
            await service.put_secret(security, EMBEDDED_TENANT, SECRET_REF, "never-exported")
        finally:
            await store.close()

    asyncio.run(seed())


def _document(tmp_path: Path) -> Path:
    document = dump_snapshot(contract_snapshot(EMBEDDED_TENANT))
    del document["tenant_id"]  # the tokens' tenant is implied
    path = tmp_path / "larkspur.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def test_import_runs_each_step_as_a_permitted_token_and_export_reads_it_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir = tmp_path / "home"
    _seed_secret(data_dir)
    path = _document(tmp_path)
    base = ["config", "import", str(path), "--data-dir", str(data_dir)]
    modeller = _token(data_dir, Role.ESRA_DATA_MANAGE, subject="modeller")
    # One role alone cannot complete the chain: it stops at the access policy.
    assert main([*base, "--token", modeller, "--publish"]) == 1
    assert "do not permit" in capsys.readouterr().err
    tokens = [
        modeller,
        _token(data_dir, Role.GOVERNANCE_MANAGE, subject="governor"),
        _token(data_dir, Role.ESRA_EXPOSURE_MANAGE, subject="publisher"),
    ]
    args = [*base, "--publish", "--reason", "CHG-1"]
    for token in tokens:
        args += ["--token", token]
    assert main(args) == 0
    assert "published" in capsys.readouterr().out
    out = tmp_path / "export.json"
    exported = [
        "config", "export", "--tenant", EMBEDDED_TENANT, "--data-dir", str(data_dir),
        "--output", str(out),
    ]  # fmt: skip
    assert main(exported) == 0
    text = out.read_text(encoding="utf-8")
    assert "never-exported" not in text
    published = load_snapshot(json.loads(text))
    expected = contract_snapshot(EMBEDDED_TENANT)
    assert published.sources == expected.sources
    assert published.access_policies == expected.access_policies
    assert published.exposures == expected.exposures

    async def history() -> list[tuple[str, str | None]]:
        store = SqliteConfigStore(data_dir / CONFIG_DATABASE_FILE)
        try:
            return [(c.subject, c.reason) for c in await store.history(EMBEDDED_TENANT)]
        finally:
            await store.close()

    changes = asyncio.run(history())
    assert ("governor", "CHG-1") in changes
    assert ("publisher", "CHG-1") in changes


def test_import_refuses_a_token_the_host_would_refuse(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    forged = _token(elsewhere, *Role)  # signed by another development key
    path = _document(tmp_path)
    status = main(["config", "import", str(path), "--data-dir", str(data_dir), "--token", forged])
    assert status == 2
    assert "refused" in capsys.readouterr().err
    assert main(["config", "export", "--tenant", EMBEDDED_TENANT, "--data-dir", str(data_dir)]) == 1


def test_import_stops_on_a_stale_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir = tmp_path / "home"
    _seed_secret(data_dir)
    token = _token(data_dir, Role.ESRA_DATA_MANAGE)
    path = _document(tmp_path)
    args = ["config", "import", str(path), "--data-dir", str(data_dir), "--token", token]
    assert main([*args, "--if-version", "0"]) == 1
    assert "version 1, not 0" in capsys.readouterr().err


def test_import_refuses_a_document_nested_past_the_decoders_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A classified refusal naming the file, not a RecursionError's traceback."""
    data_dir = tmp_path / "home"
    token = _token(data_dir, Role.ESRA_DATA_MANAGE)
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000, encoding="utf-8")
    status = main(["config", "import", str(path), "--data-dir", str(data_dir), "--token", token])
    assert status == 2
    assert "cannot read a configuration document (RecursionError)" in capsys.readouterr().err


CLAIMS_SECRET = "claims-pw"


def _seed_claims_secret(data_dir: Path, *, stored: bool) -> None:
    """Record ``claims-pw``'s write in the workspace; ``stored``: in the host's secret store
    too (not stored is what a host killed between the two leaves behind)."""

    async def seed() -> None:
        async with contextlib.AsyncExitStack() as stack:
            durable = await open_state(
                stack, embedded_state(data_dir), policies={}, clock=FakeClock()
            )
            assert durable.workspaces is not None
            security = Administrator.of("sec", Grant(Role.SECURITY_MANAGE, EMBEDDED_TENANT))
            vault = durable.secrets if stored else InMemorySecretVault()
            service = ConnectionSecretService(
                durable.workspaces, vault, audit=InMemoryAuditSink(), clock=FakeClock()
            )
            await service.put_secret(security, EMBEDDED_TENANT, CLAIMS_SECRET, "claims-value")

    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    asyncio.run(seed())


def _claims_document(tmp_path: Path) -> Path:
    snapshot = contract_snapshot(EMBEDDED_TENANT)
    template = f"postgresql://claims:${{secret:{CLAIMS_SECRET}}}@127.0.0.1:5432/claims"
    sources = tuple(attrs.evolve(s, connection_ref=template) for s in snapshot.sources)
    path = tmp_path / "claims.json"
    path.write_text(json.dumps(dump_snapshot(attrs.evolve(snapshot, sources=sources))))
    return path


@pytest.mark.parametrize("stored", [False, True])
def test_import_refuses_a_source_naming_a_secret_the_host_does_not_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stored: bool
) -> None:
    """As the admin API does (``unwritten_secrets``): the workspace recording a secret's
    write is not enough, the host's secret store must hold it."""
    data_dir = tmp_path / "home"
    _seed_claims_secret(data_dir, stored=stored)
    args = ["config", "import", str(_claims_document(tmp_path)), "--data-dir", str(data_dir)]
    for role in (Role.ESRA_DATA_MANAGE, Role.GOVERNANCE_MANAGE, Role.ESRA_EXPOSURE_MANAGE):
        args += ["--token", _token(data_dir, role)]

    status = main([*args, "--publish"])

    captured = capsys.readouterr()
    if stored:
        assert status == 0, captured.err
        assert "published" in captured.out
    else:
        assert status == 1
        assert "names a missing connection secret" in captured.err
        assert (
            main(["config", "export", "--tenant", EMBEDDED_TENANT, "--data-dir", str(data_dir)])
            == 1
        )
