"""A running ``esra serve`` and a store initialised by another process.

The embedded default binds its document store mandatory, and the store starts uninitialised.
Before, every answer of a fresh ``esra serve`` was "degraded" with "Source 'Internal
documents' is unavailable", and the host logged a failed health check of the store's missing
file every health TTL. Spec 004 makes the store a source when it is initialised, so until
then it is out of scope: answers are complete and nothing probes it.

Initialisation may happen in another process — here ``esra ingest`` on the same data
directory while the host serves, as a new user's first run does; another host or worker on
one database is the same case. The running host learns it from the store's database (its
readiness follower), and from then on searches the store and takes uploads through its own
admin API, without a restart.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from esra.core._docstore.store_source import STORE_NAME
from tests._serve_process import ServeHost, esra_argv, serve_process

pytestmark = pytest.mark.integration

QUESTION = "battery charger blinks red"
HANDBOOK = """# Workshop battery charger handbook

When a battery charger blinks red in the workshop, unplug it, wait ten seconds and try the
spare charger from the blue cabinet before opening a ticket.
"""
# A safety net for a slow machine (the host looks every 2 s), not a measurement.
DEADLINE_S = 60.0


def _token(data_dir: Path, *options: str) -> str:
    argv = ["dev-token", "--tenant", "larkspur", "--subject", "ops", "--data-dir", str(data_dir)]
    done = subprocess.run(  # noqa: S603
        esra_argv(*argv, *options), capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


async def _answer(host: ServeHost, token: str) -> dict[str, Any]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http,
        Client(streamable_http_client(f"{host.url}/mcp", http_client=http)) as client,
    ):
        found = await client.call_tool("esra_larkspur", {"prompt": QUESTION})
    assert found.structured_content is not None, found.content
    return dict(found.structured_content)


async def _store_status(host: ServeHost, token: str) -> str:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http:
        state = await http.get(f"{host.url}/admin/v1/store")
    assert state.status_code == 200, state.text
    return str(state.json()["status"])


def _sources(answer: dict[str, Any]) -> set[str]:
    return {str(result["source"]) for result in answer["results"]}


async def test_a_store_ingested_beside_a_running_host_is_searched_without_a_restart(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "esra"
    log = tmp_path / "serve.log"
    handbook = tmp_path / "charger-handbook.md"
    handbook.write_text(HANDBOOK, encoding="utf-8")
    with serve_process(log, "--data-dir", str(data_dir), stop="interrupt") as host:
        caller = _token(data_dir, "--claim", "region=emea", "--claim", "document_scopes=general")
        operator = _token(data_dir, "--role", "ESRA_DATA_READ", "--role", "ESRA_DATA_MANAGE")

        before = await _answer(host, caller)
        assert before["status"] == "complete", before["warnings"]
        assert before["warnings"] == []
        assert before["results"], "the demo's support desk answers this question"
        assert STORE_NAME not in _sources(before)
        # Not a source yet, so not one a caller lacking its scope claim is told about either.
        unscoped = await _answer(host, _token(data_dir, "--claim", "region=emea"))
        assert unscoped["status"] == "complete", unscoped["warnings"]
        assert await _store_status(host, operator) == "disabled"

        ingest = subprocess.run(  # noqa: S603
            esra_argv("ingest", "--data-dir", str(data_dir), str(handbook)),
            capture_output=True,
            text=True,
            check=False,
        )
        assert ingest.returncode == 0, ingest.stderr

        deadline = time.monotonic() + DEADLINE_S
        after = await _answer(host, caller)
        while STORE_NAME not in _sources(after) and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
            after = await _answer(host, caller)
        assert STORE_NAME in _sources(after), after
        assert after["status"] == "complete", after["warnings"]
        unscoped = await _answer(host, _token(data_dir, "--claim", "region=emea"))
        codes = {warning["code"] for warning in unscoped["warnings"]}
        assert codes == {"ESRA_SOURCE_DROPPED_MISSING_CLAIM"}, unscoped
        assert await _store_status(host, operator) == "ready"
    output = log.read_text(encoding="utf-8", errors="replace")
    assert "health check failed" not in output, output[-4000:]
    assert "initialised by another process" in output
