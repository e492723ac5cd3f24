"""The admin API and the MCP tools together, over real HTTP on 127.0.0.1.

A manager uploads a real handbook page through ``/admin/v1`` to the embedded default's
store, a worker turn indexes it, and a caller holding the store's scope finds and fetches
it through ``esra_larkspur`` — while a caller without the scope never sees it, and a
read-only operator can list it but not download it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from esra.core._clock import SystemClock
from esra.core._docstore.ingestion import IngestionWorker
from esra.sqlite import SqliteDocumentRepository
from esra.starlette._cli import build_parser, host_server
from esra.starlette._embedded import STORE_FILE
from esra.starlette._serve import free_port
from tests._external import shared_data
from tests.starlette.test_serve import _dev_token, _running

pytestmark = [pytest.mark.integration, pytest.mark.external_data]

HANDBOOK = "documents/markdown_policies_18F_handbook/getting-started/piv.md"


async def _search(url: str, token: str, prompt: str) -> tuple[list[dict[str, Any]], str]:
    """The results of ``prompt``, and the text fetched for the first result from the store."""
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client,
    ):
        found = await client.call_tool("esra_larkspur", {"prompt": prompt, "topK": 5})
        assert found.structured_content is not None, found.content
        results: list[dict[str, Any]] = found.structured_content["results"]
        stored = [r for r in results if "piv" in str(r["title"]).lower()]
        if not stored:
            return results, ""
        fetched = await client.call_tool(
            "esra_larkspur_fetch", {"documentRef": stored[0]["documentRef"], "maxChars": 4000}
        )
        assert fetched.structured_content is not None, fetched.content
        return results, str(fetched.structured_content["text"])


async def test_an_uploaded_document_is_searchable_once_indexed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Upload (admin API) → index (worker) → search and fetch (MCP), scope enforced."""
    page = shared_data(HANDBOOK)
    manager = _dev_token(tmp_path, capsys, "esra_roles=ESRA_DATA_MANAGE")
    reader = _dev_token(tmp_path, capsys, "esra_roles=ESRA_DATA_READ")
    scoped = _dev_token(tmp_path, capsys, "region=emea", "document_scopes=general")
    unscoped = _dev_token(tmp_path, capsys, "region=emea")
    port = free_port()
    args = build_parser().parse_args(
        ["serve", "--host", "127.0.0.1", "--port", str(port), "--data-dir", str(tmp_path)]
    )
    url = f"http://127.0.0.1:{port}"
    admin = f"{url}/admin/v1"
    with _running(host_server(args)):
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {manager}"}) as http:
            # The embedded store starts Disabled: the administrator enables and initialises it.
            assert (await http.get(f"{admin}/store")).json()["status"] == "disabled"
            assert (await http.post(f"{admin}/store/enable")).status_code == 200
            assert (await http.post(f"{admin}/store/initialise")).status_code == 202
            while (await http.get(f"{admin}/store")).json()["status"] == "initializing":
                await asyncio.sleep(0.05)
            assert (await http.get(f"{admin}/store")).json()["status"] == "ready"
            uploaded = await http.post(
                f"{admin}/store/documents",
                files=[("files", ("piv.md", page.read_bytes(), "text/markdown"))],
            )
            assert uploaded.status_code == 202, uploaded.text
            (outcome,) = uploaded.json()["files"]
            assert outcome["outcome"] == "stored"

            repository = SqliteDocumentRepository(tmp_path / STORE_FILE)
            try:
                (turn,) = await IngestionWorker(
                    repository, worker_id="e2e", clock=SystemClock()
                ).run_turn()
            finally:
                await repository.close()
            assert turn.indexed == 1

            listed = (await http.get(f"{admin}/store/documents")).json()
            assert listed["counts"]["indexed"] == 1
            download = f"{admin}/store/documents/{outcome['documentId']}/download"
            assert (await http.get(download)).content == page.read_bytes()
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {reader}"}) as http:
            assert (await http.get(f"{admin}/store/documents")).status_code == 200
            assert (await http.get(download)).status_code == 403

        prompt = "how do I get my PIV badge permissioned for another GSA building"
        results, text = await _search(url, scoped, prompt)
        assert "security office in each new building" in text, [r["title"] for r in results]
        hidden, nothing = await _search(url, unscoped, prompt)
        assert nothing == ""  # no result of the store reached a caller outside its scope
        assert all("piv" not in str(r["title"]).lower() for r in hidden)
