"""``esra serve --workers N``: when more than one worker is refused, and how.

Several workers may serve only settings that keep nothing a caller can observe inside the
process (``esra.starlette._workers.per_process_state``): the configuration in a PostgreSQL
``[state] database``, the cache, quota and breakers in ``[redis]``, the document-reference
keys in ``[fetch] keys_file``. Anything else is a usage error (exit 2) naming each reason,
before a port is bound or a process started. The workers themselves run in
``tests/postgres/test_serve_workers.py``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
import socket
import subprocess
from pathlib import Path

import attrs
import pytest

from esra.core._fetch.tokens import Keyring
from esra.core.config import dump_snapshot
from esra.starlette._cli import build_parser, main
from esra.starlette._demo.build import build_demo_databases
from esra.starlette._demo.config import demo_snapshot
from esra.starlette._settings import HostSettings, StateSettings
from esra.starlette._shared_state import RedisSettings
from esra.starlette._workers import (
    MAX_WORKERS,
    per_process_state,
    reserve_port,
    worker_listener,
)
from tests._serve_process import esra_argv
from tests.starlette._tokens import AUDIENCE, ISSUER, idp

POSTGRES = "postgresql://esra:${secret:env:ESRA_STATE_PASSWORD}@db.internal:5432/esra"
SHARED = HostSettings(
    issuers=(),
    tenants=(),
    keyring=Keyring.generate(),
    state=StateSettings(database=POSTGRES, keyring_env="ESRA_KEK"),
    redis=RedisSettings(url="redis://127.0.0.1:6379/0"),
)


def test_settings_sharing_everything_allow_several_workers() -> None:
    assert per_process_state(SHARED) == ()


def test_the_embedded_default_keeps_its_state_in_the_process() -> None:
    (reason,) = per_process_state(None)
    assert reason.startswith("the embedded default keeps its configuration")


@pytest.mark.parametrize(
    ("settings", "reason"),
    [
        (
            attrs.evolve(SHARED, state=StateSettings()),
            "[state] database is not PostgreSQL: each worker would serve its own configuration "
            "version",
        ),
        (
            attrs.evolve(SHARED, state=StateSettings(database="/srv/esra/state.db")),
            "[state] database is not PostgreSQL",
        ),
        (
            attrs.evolve(SHARED, redis=None),
            "[redis] is not configured: each worker would keep its own cache, fetch quota and "
            "breakers",
        ),
        (
            attrs.evolve(SHARED, redis=RedisSettings(url="redis://r", quota=False)),
            "[redis] quota = false: each worker would keep its own",
        ),
        (
            attrs.evolve(SHARED, redis=RedisSettings(url="redis://r", cache=False, breakers=False)),
            "[redis] cache = false, breakers = false: each worker would keep its own",
        ),
        (
            attrs.evolve(SHARED, keyring=None),
            "[fetch] keys_file is not set: a documentRef would open only on the worker that "
            "minted it",
        ),
    ],
)
def test_each_state_kept_per_process_is_a_reason(settings: HostSettings, reason: str) -> None:
    (found,) = per_process_state(settings)
    assert found.startswith(reason)


def test_every_reason_is_given_at_once() -> None:
    nothing_shared = attrs.evolve(SHARED, state=StateSettings(), redis=None, keyring=None)
    assert len(per_process_state(nothing_shared)) == 3


def test_one_worker_is_the_default() -> None:
    assert build_parser().parse_args(["serve"]).workers == 1


@pytest.mark.parametrize("count", ["0", "-1", str(MAX_WORKERS + 1), "two", "1.5"])
def test_a_worker_count_out_of_range_is_a_usage_error(
    count: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        build_parser().parse_args(["serve", "--workers", count])
    assert stopped.value.code == 2
    assert f"must be a whole number from 1 to {MAX_WORKERS}" in capsys.readouterr().err


def test_the_embedded_default_refuses_several_workers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "--workers", "2", "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("esra: serve: --workers 2 is refused: a caller would see state")
    assert "the embedded default keeps its configuration" in err
    assert not any(tmp_path.iterdir()), "nothing was composed"


def test_the_insecure_anonymous_mode_refuses_several_workers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["serve", "--workers", "3", "--insecure-dev-anonymous", "--data-dir", str(tmp_path)]
    assert main(argv) == 2
    assert "--insecure-dev-anonymous serves from one process only" in capsys.readouterr().err


def _deployment(directory: Path, extra: str) -> Path:
    (directory / "jwks.json").write_text(json.dumps(idp().jwks()))
    (directory / "larkspur.json").write_text(json.dumps(dump_snapshot(demo_snapshot())))
    (directory / "data").mkdir()
    build_demo_databases(directory / "data", demo_snapshot())
    settings = directory / "esra.toml"
    settings.write_text(
        f"""
[[issuers]]
issuer = "{ISSUER}"
audience = "{AUDIENCE}"
jwks_file = "jwks.json"
algorithms = ["RS256"]

[[tenants]]
id = "larkspur"
config = "larkspur.json"
databases = "data"
"""
        + extra
    )
    return settings


def test_settings_keeping_state_per_process_are_refused_naming_each_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = _deployment(tmp_path, "")
    assert main(["serve", "--config", str(settings), "--workers", "2"]) == 2
    err = capsys.readouterr().err
    assert "--workers 2 is refused" in err
    for reason in ("[state] database is not PostgreSQL", "[redis] is not configured", "keys_file"):
        assert reason in err, err


def test_a_port_in_use_is_said_before_any_worker_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    refs = tmp_path / "refs.json"
    key = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()
    refs.write_text(json.dumps({"current": "r1", "keys": {"r1": key}}))
    settings = _deployment(
        tmp_path,
        f'[fetch]\nkeys_file = "refs.json"\n[state]\ndatabase = "{POSTGRES}"\n'
        '[secrets]\nkeyring_env = "ESRA_KEK"\n[redis]\nurl = "redis://127.0.0.1:1/0"\n',
    )
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        assert main(["serve", "--config", str(settings), "--workers", "2", "--port", port]) == 1
    assert f"esra: serve: cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err


def test_the_real_command_refuses_several_workers_on_the_embedded_default(
    tmp_path: Path,
) -> None:
    done = subprocess.run(  # noqa: S603 - our own interpreter and module
        esra_argv("serve", "--workers", "2", "--data-dir", str(tmp_path)),
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--workers 2 is refused" in done.stderr
    assert "ESRA MCP endpoint" not in done.stderr


async def test_a_workers_connections_send_small_writes_at_once() -> None:
    """Each connection a worker accepts has Nagle's algorithm off (TCP_NODELAY), as asyncio
    gives the sockets it creates itself. Without it a response written in two parts waited
    for the client's delayed ACK: about 40 ms added to every call with --workers 2."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    reserved = reserve_port("127.0.0.1", port)
    listener = worker_listener("127.0.0.1", port)
    accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        accepted.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    server = await asyncio.start_server(on_connection, sock=listener)
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        nodelay = await asyncio.wait_for(accepted, timeout=10)
        writer.close()
    finally:
        server.close()
        await server.wait_closed()
        reserved.close()
    assert nodelay != 0
