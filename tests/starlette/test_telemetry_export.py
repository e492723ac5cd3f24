"""``esra serve --config`` with ``[telemetry]`` exports its spans and metrics over OTLP/HTTP.

A real ``esra serve`` process against a fake collector (an HTTP server recording what it is
sent): one MCP tool call, then the collector is polled while the host keeps serving until
the batch processor and the periodic metric reader have exported — the call's spans (ESRA's
stage spans among them, named and attributed) and its metrics, never the caller's prompt.
Settings without the exporter installed are refused at start-up; malformed ``[telemetry]``
values are refused naming the key.
"""

from __future__ import annotations

import asyncio
import http.server
import json
import re
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from esra.core.config import dump_snapshot
from esra.core.exceptions import ConfigurationError
from esra.starlette._demo.build import build_demo_databases
from esra.starlette._demo.config import CLIENT_APP, SLUG, TENANT, demo_snapshot
from esra.starlette._serve import free_port
from esra.starlette._settings import SettingsError, load_settings
from esra.starlette._telemetry_export import OTEL_EXTRA, TelemetrySettings, exporting
from tests._serve_process import serve_process
from tests.starlette._tokens import AUDIENCE, ISSUER, idp

pytestmark = pytest.mark.integration

PROMPT_CANARY = "zq-canary-warranty"
# A safety net for a slow machine, not a measurement.
_EXPORT_TIMEOUT_S = 60.0


def _sent(collector: _Collector, path: str, marker: bytes) -> bool:
    return any(p == path and marker in body for p, body in list(collector.received))


class _Collector(http.server.ThreadingHTTPServer):
    """Records every POST: its path and body."""

    def __init__(self, port: int) -> None:
        self.received: list[tuple[str, bytes]] = []
        super().__init__(("127.0.0.1", port), _Handler)


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Collector

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        self.server.received.append((self.path, body))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def collector() -> Iterator[_Collector]:
    server = _Collector(free_port())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _deployment(tmp_path: Path, telemetry: str) -> Path:
    snapshot = demo_snapshot()
    (tmp_path / "data").mkdir()
    build_demo_databases(tmp_path / "data", snapshot)
    (tmp_path / "larkspur.json").write_text(json.dumps(dump_snapshot(snapshot)))
    (tmp_path / "jwks.json").write_text(json.dumps(idp().jwks()))
    settings = tmp_path / "esra.toml"
    settings.write_text(
        f"""
[[issuers]]
issuer = "{ISSUER}"
audience = "{AUDIENCE}"
jwks_file = "jwks.json"
algorithms = ["RS256"]

[[tenants]]
id = "{TENANT}"
config = "larkspur.json"
databases = "data"
{telemetry}"""
    )
    return settings


async def test_a_served_call_reaches_the_collector_as_spans_and_metrics(
    tmp_path: Path, collector: _Collector
) -> None:
    """Traces at /v1/traces (the stage spans, the tenant), metrics at /v1/metrics."""
    port = collector.server_address[1]
    settings = _deployment(
        tmp_path,
        f'\n[telemetry]\notlp_endpoint = "http://127.0.0.1:{port}"\n'
        'service_name = "esra-under-test"\nmetrics_interval_s = 1\n',
    )
    now = int(time.time())
    token = idp().token(
        esra_tenant=TENANT, azp=CLIENT_APP, region="emea", iat=now, nbf=now, exp=now + 600
    )
    with serve_process(tmp_path / "serve.log", "--config", str(settings), stop="interrupt") as host:
        # A raw JSON-RPC call, not the SDK's Client: the Client puts its own current span's
        # context in ``_meta``, and an unsampled client span (an SDK installed in the test
        # process with sampling off) rightly makes the host's ParentBased sampler record
        # nothing. A call without trace context starts a sampled root here.
        call = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": f"esra_{SLUG}",
                "arguments": {"prompt": f"battery will not charge {PROMPT_CANARY}"},
            },
        }
        headers = {
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
        }
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            response = await http.post(f"{host.url}/mcp", json=call)
        assert response.status_code == 200, response.text
        assert response.json()["result"]["isError"] is False, response.text
        # The batch processor exports every few seconds, the metric reader every second.
        deadline = time.monotonic() + _EXPORT_TIMEOUT_S
        while not (
            _sent(collector, "/v1/traces", b"esra.retrieve")
            and _sent(collector, "/v1/metrics", b"db.client.operation.duration")
        ):
            log = (tmp_path / "serve.log").read_text(errors="replace")
            assert time.monotonic() < deadline, f"nothing exported; the host's log:\n{log[-4000:]}"
            await asyncio.sleep(0.2)
    traces = b"".join(body for path, body in collector.received if path == "/v1/traces")
    metrics = b"".join(body for path, body in collector.received if path == "/v1/metrics")
    for name in (b"esra.retrieve", b"esra.selection", b"esra.execution", b"tools/call"):
        assert name in traces, name
    assert b"esra-under-test" in traces
    assert TENANT.encode() in traces
    assert b"mcp.server.operation.duration" in metrics
    assert b"db.client.operation.duration" in metrics
    assert PROMPT_CANARY.encode() not in traces + metrics
    log = (tmp_path / "serve.log").read_text(errors="replace")
    assert "Traceback" not in log


@pytest.mark.parametrize(
    ("telemetry", "message"),
    [
        ('otlp_endpoint = "collector:4318"', "telemetry.otlp_endpoint: must be the collector"),
        ('otlp_endpoint = "http://c:4318"\ntraces = "yes"', "telemetry.traces: must be true"),
        ('otlp_endpoint = "http://c:4318"\nsample_ratio = 2', "telemetry.sample_ratio"),
        ('otlp_endpoint = "http://c:4318"\nheaders = "x"', "telemetry.headers"),
        (
            'otlp_endpoint = "https://tenant:hunter2-secret@otlp.example.com"',
            "telemetry.otlp_endpoint: must not carry credentials",
        ),
        (
            'otlp_endpoint = "https://otlp.example.com/v1?access_token=hunter2-secret"',
            "telemetry.otlp_endpoint: must not carry credentials",
        ),
        ('service_name = "esra"', "telemetry.otlp_endpoint"),
    ],
)
def test_bad_telemetry_settings_name_their_key(
    tmp_path: Path, telemetry: str, message: str
) -> None:
    """Every refusal names ``telemetry.<key>``; an unknown key is refused, not ignored."""
    settings = _deployment(tmp_path, f"\n[telemetry]\n{telemetry}\n")
    with pytest.raises(SettingsError) as refused:
        load_settings(settings, model_key=False)
    assert message in str(refused.value)


def test_export_without_the_extra_is_refused_naming_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No silent untraced host: the missing exporter is a configuration error, before any
    provider is installed."""
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)
    settings = TelemetrySettings(otlp_endpoint="http://127.0.0.1:9", metrics=False)
    with pytest.raises(ConfigurationError) as refused, exporting(settings):
        pytest.fail("exported without the exporter")
    assert OTEL_EXTRA in str(refused.value)


def test_the_documented_telemetry_table_loads_as_written(tmp_path: Path) -> None:
    """docs/observability.md's ``[telemetry]`` block is accepted with the values it shows."""
    doc = (Path(__file__).parents[2] / "docs" / "observability.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"```toml\n(.*?)```", doc, re.S)
    settings = load_settings(_deployment(tmp_path, "\n" + block), model_key=False)
    assert settings.telemetry == TelemetrySettings(otlp_endpoint="http://otel-collector:4318")
