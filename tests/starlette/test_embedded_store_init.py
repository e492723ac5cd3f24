"""The embedded default's store starts Disabled, like a configured one (issue 15 item 13).

``esra serve`` on a fresh data directory creates no store file and no schema; the store is
initialised only by the audited administrative action — through the admin API, or by
``esra ingest``, which takes that action on the user's behalf as ``cli:<OS user>``, says so
on stderr and records it in the host's audit log (``esra audit`` reads it back). The host,
the command and the audit reader are separate processes, as a user runs them.
"""

from __future__ import annotations

import http.client
import json
import os
import pwd
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from esra.sqlite._docstore_factory import schema_present
from esra.starlette._cli import main
from esra.starlette._embedded import STORE_FILE
from tests._serve_process import START_TIMEOUT_S, ServeHost, esra_argv, serve_process

pytestmark = pytest.mark.integration

MEMO = "# Chain wear\n\nReplace the chain when it has stretched half a percent.\n"


def _cli_subject() -> str:
    return f"cli:{pwd.getpwuid(os.getuid()).pw_name}"


def _esra(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(esra_argv(*argv), capture_output=True, text=True, check=False)  # noqa: S603


def _token(data_dir: Path) -> str:
    done = _esra(
        "dev-token", "--tenant", "larkspur", "--subject", "ops", "--role", "ESRA_DATA_MANAGE",
        "--data-dir", str(data_dir),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _admin(host: ServeHost, token: str, method: str, path: str) -> tuple[int, dict[str, Any]]:
    connection = http.client.HTTPConnection("127.0.0.1", host.port, timeout=60)
    try:
        connection.request(method, path, headers={"Authorization": f"Bearer {token}"})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def _store_status(host: ServeHost, token: str) -> str:
    status, body = _admin(host, token, "GET", "/admin/v1/store")
    assert status == 200, body
    return str(body["status"])


def _audit(data_dir: Path, event: str) -> list[dict[str, Any]]:
    """``esra audit``'s records of ``event`` for the embedded tenant, oldest first."""
    done = _esra("audit", "--tenant", "larkspur", "--data-dir", str(data_dir), "--event", event)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in reversed(done.stdout.splitlines())]


def test_serve_leaves_the_store_disabled_and_ingest_initialises_it_audited(
    tmp_path: Path,
) -> None:
    """A fresh ``esra serve`` reports the store Disabled and creates no schema; ``esra ingest``
    says it initialises the store, the audit log names the CLI user for the enable and the
    initialisation, the files are indexed, and the next ``esra serve`` finds the store Ready.
    A second ingest initialises nothing more."""
    data_dir = tmp_path / "esra"
    store = data_dir / STORE_FILE
    memo = tmp_path / "memo.md"
    memo.write_text(MEMO)
    log = tmp_path / "serve.log"
    with serve_process(log, "--data-dir", str(data_dir), stop="interrupt") as host:
        token = _token(data_dir)
        assert _store_status(host, token) == "disabled"
        assert not store.exists()
        assert not schema_present(store)
        # The user's documented flow: ingest while the host runs.
        ingested = _esra("ingest", "--data-dir", str(data_dir), str(memo))
    assert ingested.returncode == 0, ingested.stderr
    subject = _cli_subject()
    assert (
        f"initialising the embedded document store {store} (audited as esra.store.enable and "
        f"esra.store.initialise by {subject})"
    ) in ingested.stderr
    assert "memo.md" in ingested.stdout
    assert "indexed" in ingested.stdout
    assert schema_present(store)

    enabled = _audit(data_dir, "esra.store.enable")
    initialised = _audit(data_dir, "esra.store.initialise")
    assert [(r["outcome"], r["dimensions"]["operator"]) for r in enabled] == [("ok", subject)]
    assert [(r["outcome"], r["dimensions"]["operator"]) for r in initialised] == [
        ("started", subject),
        ("ok", subject),
    ]

    with serve_process(log, "--data-dir", str(data_dir), stop="interrupt") as host:
        assert _store_status(host, _token(data_dir)) == "ready"

    again = tmp_path / "again.md"
    again.write_text("# Tyre pressure\n\nCheck the tyre pressure every week.\n")
    second = _esra("ingest", "--data-dir", str(data_dir), str(again))
    assert second.returncode == 0, second.stderr
    assert "initialising" not in second.stderr
    assert len(_audit(data_dir, "esra.store.initialise")) == 2


def test_the_administrator_initialises_the_embedded_store_through_the_admin_api(
    tmp_path: Path,
) -> None:
    """Enable, then initialise, through the admin API: Initializing, then Ready, audited
    with the operator's subject; before that, uploads are refused as not ready."""
    data_dir = tmp_path / "esra"
    with serve_process(tmp_path / "serve.log", "--data-dir", str(data_dir)) as host:
        token = _token(data_dir)
        refused, _ = _admin(host, token, "GET", "/admin/v1/store/documents")
        assert refused == 409
        status, body = _admin(host, token, "POST", "/admin/v1/store/enable")
        assert (status, body["status"]) == (200, "enabled")
        status, body = _admin(host, token, "POST", "/admin/v1/store/initialise")
        assert (status, body["status"]) == (202, "initializing")
        deadline = time.monotonic() + START_TIMEOUT_S  # a safety net, not a measurement
        while _store_status(host, token) != "ready":
            assert time.monotonic() < deadline, "the store never became ready"
            time.sleep(0.1)
    assert schema_present(data_dir / STORE_FILE)
    initialised = _audit(data_dir, "esra.store.initialise")
    assert [(r["outcome"], r["dimensions"]["operator"]) for r in initialised] == [
        ("started", "ops"),
        ("ok", "ops"),
    ]


def test_a_worker_never_initialises_the_embedded_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``esra worker --once`` on a fresh data directory says the store is not initialised
    and how it gets initialised, exits 1, and creates no store file."""
    assert main(["worker", "--data-dir", str(tmp_path), "--once"]) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path / STORE_FILE} is not initialised" in err
    assert "or once `esra ingest` initialises it" in err
    assert not (tmp_path / STORE_FILE).exists()


def test_a_failed_initialisation_is_reported_and_audited_as_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A store file that cannot be created (a directory is in its place): ``esra ingest``
    exits 1 with the classified reason and remedy, and the audit log records the failure
    against the CLI user."""
    (tmp_path / STORE_FILE).mkdir()
    memo = tmp_path / "memo.md"
    memo.write_text(MEMO)
    assert main(["ingest", "--data-dir", str(tmp_path), str(memo)]) == 1
    err = capsys.readouterr().err
    assert "initialising the embedded document store" in err
    assert (
        f"cannot initialise the document store {tmp_path / STORE_FILE}: database_unavailable" in err
    )
    assert "then initialise again" in err
    assert main(["audit", "--tenant", "larkspur", "--data-dir", str(tmp_path)]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    failed = [
        r for r in records if r["event"] == "esra.store.initialise" and r["outcome"] == "failed"
    ]
    assert [(r["reason"], r["dimensions"]["operator"]) for r in failed] == [
        ("database_unavailable", _cli_subject())
    ]
