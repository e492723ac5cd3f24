"""``esra dev-token`` + ``esra serve`` end to end: real uvicorn on 127.0.0.1, the SDK's client."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from esra.starlette._cli import build_parser, host_server, main
from esra.starlette._embedded import STORE_FILE
from esra.starlette._serve import HostServer, free_port

pytestmark = pytest.mark.integration


@contextlib.contextmanager
def _running(server: HostServer) -> Iterator[HostServer]:
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    try:
        assert server.started.wait(timeout=60), "uvicorn did not start"
        yield server
    finally:
        server.stop()
        thread.join(timeout=60)
        assert not thread.is_alive()


def _dev_token(data_dir: Path, capsys: pytest.CaptureFixture[str], *claims: str) -> str:
    argv = ["dev-token", "--tenant", "larkspur", "--subject", "alice", "--data-dir", str(data_dir)]
    assert main([*argv, *(a for c in claims for a in ("--claim", c))]) == 0
    return capsys.readouterr().out.strip()


async def test_dev_token_and_serve_round_trip(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A dev token lists the embedded tools and calls search then fetch over real HTTP."""
    token = _dev_token(tmp_path, capsys, "region=emea")
    port = free_port()
    args = build_parser().parse_args(
        ["serve", "--host", "127.0.0.1", "--port", str(port), "--data-dir", str(tmp_path)]
    )
    url = f"http://127.0.0.1:{port}"
    with _running(host_server(args)) as server:
        assert server.resource_url == f"{url}/mcp"
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http,
            Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client,
        ):
            names = [tool.name for tool in (await client.list_tools()).tools]
            found = await client.call_tool(
                "esra_larkspur", {"prompt": "my e-bike battery is not charging", "topK": 3}
            )
            assert found.structured_content is not None, found.content
            ref = found.structured_content["results"][0]["documentRef"]
            fetched = await client.call_tool(
                "esra_larkspur_fetch", {"documentRef": ref, "maxChars": 40}
            )
        async with httpx2.AsyncClient() as anonymous:
            metadata = await anonymous.get(f"{url}/.well-known/oauth-protected-resource/mcp")
            refused = await anonymous.post(f"{url}/mcp", json={})
    assert names == ["esra_larkspur", "esra_larkspur_fetch"]
    first = found.structured_content["results"][0]
    assert first["title"] == "E-bike battery not charging"
    assert len(found.structured_content["results"]) <= 3
    assert fetched.structured_content is not None, fetched.content
    assert fetched.structured_content["title"] == "E-bike battery not charging"
    assert len(fetched.structured_content["text"]) <= 40
    assert fetched.structured_content["hasMore"] is True
    assert metadata.json()["resource"] == f"{url}/mcp"
    assert metadata.json()["authorization_servers"] == ["https://dev-issuer.esra.invalid"]
    assert refused.status_code == 401
    assert "resource_metadata=" in refused.headers["www-authenticate"]
    # The store starts Disabled: serving creates neither its file nor its schema.
    assert not (tmp_path / STORE_FILE).exists()


async def test_an_unauthorized_caller_of_the_real_server_sees_no_tools(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without a token, or with one from another data directory's key, nothing is listed."""
    stranger = _dev_token(tmp_path / "elsewhere", capsys)
    port = free_port()
    args = build_parser().parse_args(["serve", "--port", str(port), "--data-dir", str(tmp_path)])
    with _running(host_server(args)):
        for headers in ({}, {"Authorization": f"Bearer {stranger}"}):
            with pytest.raises(ExceptionGroup) as refused:
                async with (
                    httpx2.AsyncClient(headers=headers) as http,
                    Client(
                        streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)
                    ) as client,
                ):
                    await client.list_tools()
            assert refused.group_contains(MCPError, depth=None)


async def test_insecure_dev_anonymous_serves_token_less_calls_as_the_dev_caller(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--insecure-dev-anonymous (for the conformance suite) lists tools without a token;
    a bad token is still refused, since only a request without Authorization is filled in."""
    stranger = _dev_token(tmp_path / "elsewhere", capsys)
    port = free_port()
    args = build_parser().parse_args(
        ["serve", "--port", str(port), "--data-dir", str(tmp_path), "--insecure-dev-anonymous"]
    )
    url = f"http://127.0.0.1:{port}/mcp"
    with _running(host_server(args)):
        async with (
            httpx2.AsyncClient() as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            names = [tool.name for tool in (await client.list_tools()).tools]
        async with httpx2.AsyncClient() as raw:
            refused = await raw.post(url, json={}, headers={"Authorization": f"Bearer {stranger}"})
    assert names == ["esra_larkspur", "esra_larkspur_fetch"]
    assert refused.status_code == 401


@pytest.mark.parametrize(
    "extra",
    [["--config", "esra.toml"], ["--host", "0.0.0.0"]],  # noqa: S104 - refused, never bound
)
def test_insecure_dev_anonymous_is_refused_off_the_embedded_loopback_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str]
) -> None:
    """Never with --config, never on a non-loopback address: exit 2 without serving."""
    argv = ["serve", "--insecure-dev-anonymous", "--data-dir", str(tmp_path), *extra]
    assert main(argv) == 2
    assert "--insecure-dev-anonymous" in capsys.readouterr().err


def test_serve_refuses_unusable_settings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``esra serve --config`` with a bad file exits 2 naming the key, without serving."""
    config = tmp_path / "esra.toml"
    config.write_text("[server]\nport = 1\n")
    assert main(["serve", "--config", str(config)]) == 2
    assert "server.port: unknown key" in capsys.readouterr().err
