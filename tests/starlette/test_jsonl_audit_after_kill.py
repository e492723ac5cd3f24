"""A JSONL audit record stays readable after a ``kill -9`` tore the line before it.

Found by a hostile review of durability (real ``esra serve`` processes): a SIGKILL in the
middle of a batch's write leaves a torn last line; the restarted host appended its next,
acknowledged and fsynced record straight onto it, and every reader skipped the merged line.
The writer now ends a torn line before appending.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests._serve_process import esra_argv, kill_9, serve_process
from tests.starlette._settings_files import write_host_settings
from tests.starlette._tokens import idp

pytestmark = pytest.mark.integration

TENANT = "acme-review"


def _token(*roles: str, subject: str) -> str:
    now = int(time.time())
    return idp().token(
        sub=subject, esra_tenant=TENANT, esra_roles=list(roles), iat=now, nbf=now, exp=now + 900
    )


def _audit_cli(settings: Path) -> list[dict[str, Any]]:
    answer = subprocess.run(  # noqa: S603 - our own interpreter and module
        esra_argv("audit", "--config", str(settings), "--tenant", TENANT, "--all"),
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert answer.returncode == 0, answer.stderr
    return [json.loads(line) for line in answer.stdout.splitlines()]


async def _view_config(url: str, subject: str) -> None:
    """One audited admin call (``esra.admin.workspace.view``), answered 200."""
    bearer = _token("ESRA_DATA_READ", subject=subject)
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {bearer}"}) as http:
        answer = await http.get(f"{url}/admin/v1/config")
    assert answer.status_code == 200, answer.text


async def test_jsonl_audit_record_acknowledged_after_a_torn_tail_stays_readable(
    tmp_path: Path,
) -> None:
    """``[audit] kind = "jsonl"``: a host killed with SIGKILL in the middle of a batch's
    ``write(2)`` leaves a torn last line (a regular-file write is cut short by a fatal
    signal). The restarted host appends its next batch right after that fragment, so the
    first record it writes — committed and fsynced before its call was answered — is glued
    onto the torn line and never read back by ``esra audit`` or ``GET /admin/v1/audit``."""
    settings = write_host_settings(
        tmp_path,
        tenant=TENANT,
        durable='[audit]\nkind = "jsonl"\npath = "audit.jsonl"\nwait_for_write = true\n',
    )
    journal = tmp_path / "audit.jsonl"
    log = tmp_path / "serve.log"
    with serve_process(log, "--config", str(settings)) as host:
        await _view_config(host.url, "before-the-kill")
        kill_9(host)
    # What the SIGKILL mid-write leaves: the killed batch's bytes up to the cut, no newline.
    whole = journal.read_bytes()
    assert whole.endswith(b"\n")
    last = whole.rstrip(b"\n").rsplit(b"\n", 1)[-1]
    with journal.open("ab") as out:
        out.write(last[: len(last) // 2])

    with serve_process(log, "--config", str(settings)) as host:
        await _view_config(host.url, "after-the-restart")  # answered: its record is durable

    subjects = [r["dimensions"].get("subject") for r in _audit_cli(settings)]
    assert "before-the-kill" in subjects, subjects
    assert "after-the-restart" in subjects, subjects
