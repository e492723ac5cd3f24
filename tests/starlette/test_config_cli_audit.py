"""``esra config import`` audits like the admin API: into the host's own audit store.

The import applies changes through the chain's services, so its records — changes, denials
and conflicts alike, each with the tenant — must land where the host's other records do
(what ``GET /admin/v1/audit`` and ``esra audit`` read), be written before the command exits,
and, when that store cannot be opened, nothing may be applied at all.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from esra.core._admin.roles import Role
from esra.core.codes import AuditEvent
from esra.core.config import dump_snapshot
from esra.core.testing.config_contract import contract_snapshot
from esra.starlette._cli import main
from esra.starlette._config_cli import CONFIG_DATABASE_FILE
from esra.starlette._embedded import EMBEDDED_TENANT
from tests._serve_process import esra_argv
from tests.starlette._settings_files import write_host_settings
from tests.starlette._tokens import idp
from tests.starlette.test_config_cli import _document, _seed_secret, _token

CONFIGURED_TENANT = "acme-import"


def _audit_lines(
    capsys: pytest.CaptureFixture[str], *location: str, tenant: str
) -> list[dict[str, Any]]:
    """The tenant's records as ``esra audit`` prints them, from where the host writes."""
    capsys.readouterr()
    assert main(["audit", *location, "--tenant", tenant, "--all"]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def _steps(records: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {(r["event"], r["outcome"], r["dimensions"]["subject"]) for r in records}


def _import_denied_then_whole(
    capsys: pytest.CaptureFixture[str], data_dir: Path, document: Path
) -> None:
    base = ["config", "import", str(document), "--data-dir", str(data_dir)]
    modeller = _token(data_dir, Role.ESRA_DATA_MANAGE, subject="modeller")
    # The modeller alone models the source and capability, then may not author the policy.
    assert main([*base, "--token", modeller, "--publish"]) == 1
    assert "it is audited" in capsys.readouterr().err
    args = [*base, "--publish"]
    for token in (
        _token(data_dir, Role.ESRA_DATA_MANAGE, subject="modeller"),
        _token(data_dir, Role.GOVERNANCE_MANAGE, subject="governor"),
        _token(data_dir, Role.ESRA_EXPOSURE_MANAGE, subject="publisher"),
    ):
        args += ["--token", token]
    assert main(args) == 0
    assert "published" in capsys.readouterr().out


def test_embedded_import_writes_its_denial_and_its_changes_to_the_hosts_audit_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir = tmp_path / "home"
    _seed_secret(data_dir)
    _import_denied_then_whole(capsys, data_dir, _document(tmp_path))

    records = _audit_lines(capsys, "--data-dir", str(data_dir), tenant=EMBEDDED_TENANT)
    steps = _steps(records)
    assert (AuditEvent.ADMIN_POLICY_AUTHOR.value, "denied", "modeller") in steps, steps
    for event, subject in (
        (AuditEvent.ADMIN_SOURCE_MODEL, "modeller"),
        (AuditEvent.ADMIN_CAPABILITY_DEFINE, "modeller"),
        (AuditEvent.ADMIN_POLICY_AUTHOR, "governor"),
        (AuditEvent.ADMIN_EXPOSURE_BIND, "publisher"),
        (AuditEvent.ADMIN_EXPOSURE_PUBLISH, "publisher"),
    ):
        assert (event.value, "ok", subject) in steps, (event, steps)
    # The tenant is on every record, the denial included.
    assert {r["tenant_id"] for r in records} == {EMBEDDED_TENANT}


def test_embedded_import_applies_nothing_when_the_audit_store_cannot_be_opened(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir = tmp_path / "home"
    _seed_secret(data_dir)
    # A table of that name the audit schema did not create: the audit log cannot be opened
    # on this state database, while its configuration tables can.
    with sqlite3.connect(data_dir / CONFIG_DATABASE_FILE) as conn:
        conn.execute("CREATE TABLE audit_records (unrelated TEXT)")
    conn.close()
    path = _document(tmp_path)
    token = _token(data_dir, Role.ESRA_DATA_MANAGE, subject="modeller")
    status = main(["config", "import", str(path), "--data-dir", str(data_dir), "--token", token])
    assert status == 1
    err = capsys.readouterr().err
    assert "audit" in err
    assert "nothing was applied" in err
    # The source and capability the modeller may change were not applied either.
    assert main(["config", "export", "--tenant", EMBEDDED_TENANT, "--data-dir", str(data_dir),
                 "--draft"]) == 0  # fmt: skip
    draft = json.loads(capsys.readouterr().out)
    assert draft["sources"] == []
    assert draft["capabilities"] == []


def test_import_on_an_unreachable_state_database_refuses_with_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Port 1 on the loopback: nothing listens, the connection is refused at once.
    config = _settings(tmp_path, database='"postgresql://esra@127.0.0.1:1/esra"', audit="database")
    path = _configured_document(tmp_path)
    token = _configured_token(Role.ESRA_DATA_MANAGE, subject="modeller")
    status = main(["config", "import", str(path), "--config", str(config), "--token", token])
    assert status == 1
    err = capsys.readouterr().err
    assert "nothing was applied" in err
    assert "Traceback" not in err


def _settings(tmp_path: Path, *, database: str, audit: str) -> Path:
    durable = f"""[state]
database = {database}

[secrets]
keyring_file = "kek.json"

[audit]
kind = "{audit}"
"""
    return write_host_settings(tmp_path, tenant=CONFIGURED_TENANT, durable=durable)


def _configured_document(tmp_path: Path) -> Path:
    path = tmp_path / "import.json"
    path.write_text(json.dumps(dump_snapshot(contract_snapshot(CONFIGURED_TENANT))))
    return path


def _configured_token(*roles: Role, subject: str) -> str:
    now = int(time.time())
    return idp().token(
        sub=subject,
        esra_tenant=CONFIGURED_TENANT,
        esra_roles=[r.value for r in roles],
        iat=now,
        nbf=now,
        exp=now + 900,
    )


def test_import_in_a_process_logs_its_records_where_the_host_audits_to_its_log(
    tmp_path: Path,
) -> None:
    # [audit] kind = "logging": the host's audit records are its log lines, so the
    # command's must reach its log (stderr) too, denials included.
    config = _settings(tmp_path, database='"state.db"', audit="logging")
    path = _configured_document(tmp_path)
    token = _configured_token(Role.ESRA_EXPOSURE_MANAGE, subject="publisher")
    done = subprocess.run(  # noqa: S603 - this interpreter, the test's own arguments
        esra_argv("config", "import", str(path), "--config", str(config), "--token", token),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    logged = [
        json.loads(line[line.index("{") :])
        for line in done.stderr.splitlines()
        if "esra.audit" in line and "{" in line
    ]
    assert (AuditEvent.ADMIN_SOURCE_MODEL.value, "denied", "publisher", CONFIGURED_TENANT) in {
        (r["event"], r["outcome"], r["dimensions"]["subject"], r["tenant_id"]) for r in logged
    }, done.stderr
