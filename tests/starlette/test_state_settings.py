"""``[state]``, ``[secrets]`` and ``[audit]``: where a configured host keeps what
administrators change, validated with errors naming the key; and the rule that a
configuration published through the admin API wins over the settings file after a restart."""

from __future__ import annotations

import base64
import json
import logging
import secrets
from pathlib import Path

import attrs
import pytest

from esra.core._admin.store import adopt
from esra.core._clock import SystemClock
from esra.core.config import dump_snapshot
from esra.starlette._bootstrap import bootstrap
from esra.starlette._demo.build import build_demo_databases
from esra.starlette._demo.config import demo_snapshot
from esra.starlette._settings import SettingsError, load_settings
from tests.starlette._tokens import AUDIENCE, ISSUER, idp

BASE = f"""
[[issuers]]
issuer = "{ISSUER}"
audience = "{AUDIENCE}"
jwks_file = "jwks.json"

[[tenants]]
id = "larkspur"
config = "larkspur.json"
databases = "data"
"""


@pytest.fixture
def deployment(tmp_path: Path) -> Path:
    (tmp_path / "jwks.json").write_text(json.dumps(idp().jwks()))
    (tmp_path / "larkspur.json").write_text(json.dumps(dump_snapshot(demo_snapshot())))
    (tmp_path / "data").mkdir()
    build_demo_databases(tmp_path / "data", demo_snapshot())
    keyring = tmp_path / "kek.json"
    material = base64.b64encode(secrets.token_bytes(32)).decode()
    keyring.write_text(json.dumps({"active": "k1", "keys": {"k1": material}}))
    keyring.chmod(0o600)
    return tmp_path


def _load(directory: Path, extra: str) -> object:
    path = directory / "esra.toml"
    path.write_text(BASE + extra)
    return load_settings(path, model_key=False)


def _error(directory: Path, extra: str) -> str:
    with pytest.raises(SettingsError) as refused:
        _load(directory, extra)
    return str(refused.value)


def test_without_state_the_settings_keep_the_old_in_memory_behaviour(deployment: Path) -> None:
    settings = _load(deployment, "")
    state = settings.state  # type: ignore[attr-defined]
    assert (state.database, state.audit_kind) == (None, "logging")


def test_a_sqlite_state_database_is_read_beside_the_file(deployment: Path) -> None:
    settings = _load(
        deployment, '[state]\ndatabase = "state.db"\n[secrets]\nkeyring_file = "kek.json"\n'
    )
    state = settings.state  # type: ignore[attr-defined]
    assert state.database == str(deployment / "state.db")
    assert (state.audit_kind, state.wait_for_write, state.flush_interval_ms) == (
        "database",
        True,
        100,
    )
    assert state.keyring_file == deployment / "kek.json"
    assert state.config_poll_s == 2.0  # the default live-publication poll


def test_the_live_publication_poll_is_read_from_state(deployment: Path) -> None:
    settings = _load(
        deployment,
        '[state]\ndatabase = "state.db"\nconfig_poll_s = 0.5\n'
        '[secrets]\nkeyring_file = "kek.json"\n',
    )
    assert settings.state.config_poll_s == 0.5  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "database",
    [
        "postgresql://${secret:env:PGUSER}:${secret:file:/run/secrets/pw}@db:5432/esra",
        "postgresql://esra:${secret%3Aenv%3APGPW}@db:5432/esra",
    ],
)
def test_a_state_database_may_name_its_credentials_by_any_reference(
    deployment: Path, database: str
) -> None:
    """References hold ":" and "/": plainly written or encoded, they are not a literal
    password, and the host is still the one the URL names."""
    settings = _load(
        deployment, f'[state]\ndatabase = "{database}"\n[secrets]\nkeyring_env = "ESRA_KEK"\n'
    )
    assert settings.state.database == database  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ('[state]\ndatabase = "state.db"\n', "secrets.keyring_file: is required"),
        ('[secrets]\nkeyring_file = "kek.json"\n', "state.database: is required"),
        (
            '[state]\ndatabase = "postgresql://esra:hunter2@db:5432/esra"\n'
            '[secrets]\nkeyring_env = "ESRA_KEK"\n',
            "state.database: holds a literal password",
        ),
        (
            '[state]\ndatabase = "postgresql://${secret:env:U}:hunter2@db:5432/esra"\n'
            '[secrets]\nkeyring_env = "ESRA_KEK"\n',
            "state.database: holds a literal password",
        ),
        ('[audit]\nkind = "database"\n', 'audit.kind: "database" needs [state] database'),
        ('[audit]\nkind = "jsonl"\n', 'audit.path: is required for kind "jsonl"'),
        ('[audit]\nkind = "syslog"\n', "audit.kind: must be one of"),
        (
            '[secrets]\nkeyring_file = "kek.json"\nkeyring_env = "X"\n[state]\ndatabase = "s.db"\n',
            "secrets.keyring_file: give at most one",
        ),
        ('[state]\ndatabase = "s.db"\nconfig_schema = "Bad-Name"\n', "state.config_schema"),
        ('[state]\ncolour = "red"\n', "state.colour: unknown key"),
        ("[state]\nconfig_poll_s = 0\n", "state.config_poll_s: must be between"),
        ('[state]\nconfig_poll_s = "2s"\n', "state.config_poll_s: must be a number"),
    ],
)
def test_state_problems_name_their_key(deployment: Path, extra: str, expected: str) -> None:
    message = _error(deployment, extra)
    assert expected in message
    assert "hunter2" not in message


async def test_the_database_publication_wins_over_a_changed_file(
    deployment: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Once the tenant's configuration is in the state database, a restart serves it, not the
    settings file — and says so when the file changed since it was adopted."""
    extra = '[state]\ndatabase = "state.db"\n[secrets]\nkeyring_file = "kek.json"\n'
    settings = _load(deployment, extra)
    async with bootstrap(settings, model=object()) as runtime:  # type: ignore[arg-type]
        assert runtime.workspaces is not None
        assert runtime.audit_reader is not None
        await adopt(runtime.workspaces, demo_snapshot(), subject="ops", at=SystemClock().now())
    demo = demo_snapshot()
    changed = attrs.evolve(
        demo, version="file-2", exposures=tuple(attrs.evolve(e, top_k=3) for e in demo.exposures)
    )
    (deployment / "larkspur.json").write_text(json.dumps(dump_snapshot(changed)))
    settings = _load(deployment, extra)
    with caplog.at_level(logging.WARNING, logger="esra.starlette._bootstrap"):
        async with bootstrap(settings, model=object()) as runtime:  # type: ignore[arg-type]
            (served,) = runtime.snapshots
            assert served.version == demo_snapshot().version
            assert set(runtime.providers.by_tenant["larkspur"]) == {
                s.id for s in demo_snapshot().sources
            }
    assert "is NOT applied" in caplog.text
