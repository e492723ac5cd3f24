"""The embedded default keeps its state across ``kill -9`` (issue 14).

``esra serve`` with no settings kept its drafts, secrets and audit records in memory: a
restart lost every one. Here a real process is given a secret, a new SQLite source, a
capability, an access policy and an exposure through the admin API and publishes it; the
tool answers; then the process is killed with SIGKILL — no shutdown, no flush — and started
again on the same data directory. The tool is still served and answers, the draft history
and the secret are still there, and every audit record read before the kill is still
readable. The data directory's files hold no plaintext secret.

A publication is also served live: the new source answers on the publishing host at once,
without the restart it needed before the host's ``ConfigFollower`` was wired in.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from esra.core._config.converter import CONVERTER
from esra.core.config import AccessPolicy, BindingMode, FieldType, SourceBinding
from esra.core.secrets import EncryptedSecretStore, KeyEncryptionKeys
from esra.sqlite._config_store import SqliteConfigStore
from esra.sqlite._secrets import SqliteSecretTable
from esra.starlette._cli import EXIT_INTERRUPTED
from esra.starlette._durable_state import (
    EMBEDDED_DATABASES_DIR,
    KEYRING_FILE,
    STATE_DATABASE_FILE,
)
from esra.starlette._embedded import EMBEDDED_CLIENT_APP, EMBEDDED_TENANT
from esra.starlette._serve import free_port
from tests._serve_process import ServeHost, esra_argv, kill_9, serve_process
from tests.core.factories import make_capability, make_exposure, make_mapping, make_source
from tests.sqlite.conftest import seed_database
from tests.starlette.test_serve_process import dev_token

pytestmark = pytest.mark.integration

SECRET = "Plaintext-Secret-7f3a9c-never-stored"
COLUMNS = [("col_id", FieldType.TEXT), ("col_title", FieldType.TEXT), ("col_body", FieldType.TEXT)]
ROWS = [
    {
        "col_id": "p-1",
        "col_title": "Titanium seat post recall notice",
        "col_body": "Seat posts from batch 42 are recalled after a titanium fatigue finding.",
    },
    {
        "col_id": "p-2",
        "col_title": "Brake lever catalogue",
        "col_body": "Hydraulic brake levers for the spring range.",
    },
]


def _serve(data_dir: Path, log: Path) -> contextlib.AbstractContextManager[ServeHost]:
    return serve_process(log, "--data-dir", str(data_dir))


def _body(part: object) -> dict[str, Any]:
    body: dict[str, Any] = CONVERTER.unstructure(part)
    del body["tenant_id"]  # the token's tenant is implied
    return body


def _model() -> tuple[Any, Any, Any, Any, Any]:
    mapping = make_mapping(
        "m-parts",
        source_id="parts",
        tenant_id=EMBEDDED_TENANT,
        relation="parts",
        text_index="parts_fts",
    )
    source = make_source(
        "parts",
        tenant_id=EMBEDDED_TENANT,
        name="Parts recalls",
        description="Recall notices and catalogue entries for bicycle parts.",
        provider_kind="sqlite",
        connection_ref="parts.db",
    )
    capability = make_capability(
        [SourceBinding("parts", BindingMode.MANDATORY)],
        capability_id="cap-parts",
        tenant_id=EMBEDDED_TENANT,
        name="Parts recalls",
    )
    exposure = make_exposure(
        exposure_id="exp-parts",
        tenant_id=EMBEDDED_TENANT,
        slug="parts",
        capability_id="cap-parts",
        audience=(EMBEDDED_CLIENT_APP,),
        published=False,
    )
    return source, mapping, capability, AccessPolicy.matching(exposure), exposure


async def _tools_and_answer(url: str, token: str) -> tuple[set[str], list[dict[str, Any]] | None]:
    """The tools listed, and the results of one search of ``esra_parts`` (``None``: refused)."""
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client,
    ):
        names = {tool.name for tool in (await client.list_tools()).tools}
        if "esra_parts" not in names:
            return names, []
        found = await client.call_tool("esra_parts", {"prompt": "titanium seat post recall"})
        if found.structured_content is None:
            return names, None
        return names, list(found.structured_content["results"])


async def audit_records(http: httpx2.AsyncClient, url: str) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        params = {"limit": "1000", **({"cursor": cursor} if cursor else {})}
        page = await http.get(f"{url}/admin/v1/audit", params=params)
        assert page.status_code == 200, page.text
        records.extend(page.json()["records"])
        cursor = page.json()["nextCursor"]
        if cursor is None:
            return records


async def _assert_the_data_directory_kept_history_and_secret(data_dir: Path) -> None:
    """Every change is in the history; the secret decrypts; no file holds its plaintext."""
    config_store = SqliteConfigStore(data_dir / STATE_DATABASE_FILE)
    try:
        history = [(c.action, c.subject) for c in await config_store.history(EMBEDDED_TENANT)]
    finally:
        await config_store.close()
    assert [action for action, _ in history] == [
        "esra.admin.workspace.adopt",
        "esra.admin.secret.write",
        "esra.admin.source.model",
        "esra.admin.capability.define",
        "esra.admin.policy.author",
        "esra.admin.exposure.bind",
        "esra.admin.exposure.publish",
    ]
    # The secret still decrypts with the data directory's keyring.
    table = SqliteSecretTable(data_dir / STATE_DATABASE_FILE)
    try:
        await table.initialize()
        store = EncryptedSecretStore(table, KeyEncryptionKeys.from_file(data_dir / KEYRING_FILE))
        assert await store.resolve(EMBEDDED_TENANT, "parts.db") == SECRET
    finally:
        await table.close()
    assert (data_dir / KEYRING_FILE).stat().st_mode & 0o077 == 0
    # No plaintext secret in any file of the data directory (database, WAL, journal).
    for path in data_dir.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert SECRET.encode() not in data, path
            assert SECRET.encode("utf-16-le") not in data, path


ROLES = (
    "SECURITY_MANAGE",
    "ESRA_DATA_MANAGE",
    "GOVERNANCE_MANAGE",
    "ESRA_EXPOSURE_MANAGE",
    "ESRA_DATA_READ",
)


def _seed_parts(data_dir: Path) -> None:
    """The SQLite database of the ``parts`` source, in the data directory's ``databases/``."""
    (data_dir / EMBEDDED_DATABASES_DIR).mkdir(parents=True)
    _source, mapping, *_rest = _model()
    seed_database(data_dir / EMBEDDED_DATABASES_DIR / "parts.db", mapping, COLUMNS, ROWS)


async def _publish_parts(admin: str, clients: dict[str, httpx2.AsyncClient]) -> None:
    """Model the ``parts`` source (and its secret) through the admin API and publish it."""
    source, mapping, capability, policy, exposure = _model()
    steps = [
        (clients["SECURITY_MANAGE"], "secrets/parts.db", {"value": SECRET}),
        (
            clients["ESRA_DATA_MANAGE"],
            "sources/parts",
            {"source": _body(source), "mappings": [_body(mapping)]},
        ),
        (clients["ESRA_DATA_MANAGE"], "capabilities/cap-parts", _body(capability)),
        (clients["GOVERNANCE_MANAGE"], "access-policies/parts", _body(policy)),
        (clients["ESRA_EXPOSURE_MANAGE"], "exposures/parts", _body(exposure)),
    ]
    for client, path, body in steps:
        answer = await client.put(f"{admin}/{path}", json=body)
        assert answer.status_code == 200, (path, answer.text)
    published = await clients["ESRA_EXPOSURE_MANAGE"].post(f"{admin}/exposures/parts/publish")
    assert published.status_code == 200, published.text


async def test_a_source_published_through_the_admin_api_answers_without_a_restart(
    tmp_path: Path,
) -> None:
    """Before the follower was wired in, the new tool was listed but its search answered
    ``ESRA_NO_SOURCES_AVAILABLE`` until the host restarted: its source had no provider."""
    data_dir = tmp_path / "esra"
    _seed_parts(data_dir)
    log = tmp_path / "serve.log"
    tokens = {role: dev_token(data_dir, role) for role in ROLES}
    with _serve(data_dir, log) as host:
        names, results = await _tools_and_answer(host.url, dev_token(data_dir))
        assert "esra_parts" not in names  # not published yet
        clients = {
            role: httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
            for role, token in tokens.items()
        }
        try:
            await _publish_parts(f"{host.url}/admin/v1", clients)
        finally:
            for client in clients.values():
                await client.aclose()
        # Right after the publish request was answered, with no restart and no waiting.
        names, results = await _tools_and_answer(host.url, dev_token(data_dir))
        assert "esra_parts" in names
        assert results is not None, log.read_text(errors="replace")[-4000:]
        assert any("seat post" in str(r["title"]).lower() for r in results), results
        host.process.send_signal(signal.SIGINT)
        # Stopping the follower first: the host still shuts down cleanly, as on a Ctrl-C.
        assert host.process.wait(timeout=60) == EXIT_INTERRUPTED
    assert "Traceback" not in log.read_text(errors="replace")


async def test_the_embedded_default_keeps_configuration_secrets_and_audit_across_kill_9(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "esra"
    _seed_parts(data_dir)
    log = tmp_path / "serve.log"
    tokens = {role: dev_token(data_dir, role) for role in ROLES}
    caller = dev_token(data_dir)

    with _serve(data_dir, log) as host:
        admin = f"{host.url}/admin/v1"
        clients = {
            role: httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
            for role, token in tokens.items()
        }
        try:
            await _publish_parts(admin, clients)
            draft = (await clients["ESRA_DATA_READ"].get(f"{admin}/config")).json()
            # An MCP call audited before the kill; the new source answers live already.
            _names, live = await _tools_and_answer(host.url, caller)
            assert live is not None
            before = await audit_records(clients["GOVERNANCE_MANAGE"], host.url)
        finally:
            for client in clients.values():
                await client.aclose()
        kill_9(host)

    events = {record["event"] for record in before}
    assert {"esra.admin.secret.write", "esra.admin.exposure.publish", "esra.invoke"} <= events

    with _serve(data_dir, log) as host:
        names, results = await _tools_and_answer(host.url, caller)
        assert "esra_parts" in names  # the publication is served after the restart
        assert results is not None  # the new source is opened from the published config
        assert any("seat post" in str(r["title"]).lower() for r in results), results
        async with httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {tokens['GOVERNANCE_MANAGE']}"}
        ) as governor:
            after = await audit_records(governor, host.url)
        async with httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {tokens['ESRA_DATA_READ']}"}
        ) as reader:
            restarted = (await reader.get(f"{host.url}/admin/v1/config")).json()
        host.process.send_signal(signal.SIGINT)
        host.process.wait(timeout=60)

    # Every record read before the kill is still there, unchanged.
    def key(record: dict[str, Any]) -> tuple[str, str, str]:
        return (record["at"], record["event"], record["correlationId"])

    assert {key(r) for r in before} <= {key(r) for r in after}
    assert len(after) > len(before)  # and the restarted host audits on top of them
    # The draft and its history survived: same version, same secret rotation count.
    assert (restarted["version"], restarted["publishedVersion"]) == (
        draft["version"],
        draft["publishedVersion"],
    )
    assert {"reference": "parts.db", "writes": 1} in restarted["secrets"]
    assert "parts" in {s["id"] for s in restarted["configuration"]["sources"]}
    await _assert_the_data_directory_kept_history_and_secret(data_dir)
    assert SECRET not in log.read_text(errors="replace")


def test_a_keyring_open_to_others_stops_the_embedded_default(tmp_path: Path) -> None:
    """The generated keyring loosened to 0644 is refused at start, with a clear message."""
    data_dir = tmp_path / "esra"
    log = tmp_path / "serve.log"
    with _serve(data_dir, log) as host:
        host.process.send_signal(signal.SIGINT)
        host.process.wait(timeout=60)
    keyring = data_dir / KEYRING_FILE
    assert keyring.stat().st_mode & 0o777 == 0o600
    keyring.chmod(0o644)
    argv = esra_argv("serve", "--port", str(free_port()), "--data-dir", str(data_dir))
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)  # noqa: S603
    assert done.returncode == 1
    assert "chmod 600" in done.stderr
    assert "Traceback" not in done.stderr
