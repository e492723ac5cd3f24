"""Real ``esra serve --config`` processes for a bench, on one PostgreSQL state database.

What ``tests/postgres/test_live_publication_processes.py`` does with its fixtures, without
importing the test suite (a bench runs as a plain script): an identity provider of the
bench's own (an RSA key, its JWKS file, tokens signed with it), the settings of a host whose
``[state]`` lives in PostgreSQL, and a context manager that starts ``esra serve`` on a free
loopback port, waits for ``/healthz`` and stops it again (SIGINT, then SIGKILL).
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import attrs
import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from esra.core.config import ConfigSnapshot, dump_snapshot
from esra.starlette._serve import free_port

__all__ = [
    "BenchIssuer",
    "ServeHost",
    "postgres_state_settings",
    "serve_host",
    "state_password_env",
]

ISSUER = "https://login.bench.example/"
AUDIENCE = "https://esra.bench.example/mcp"
# The password of the state database reaches the host through this variable, as a
# ``${secret:env:...}`` reference: a settings file never holds it.
STATE_PASSWORD_ENV = "ESRA_BENCH_STATE_PASSWORD"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0


class BenchIssuer:
    """An identity provider with one RSA key: its JWKS and the tokens it signs."""

    def __init__(self, issuer: str = ISSUER, audience: str = AUDIENCE) -> None:
        self.issuer = issuer
        self.audience = audience
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def jwks(self) -> dict[str, Any]:
        """The public JWK Set the host trusts."""
        jwk = RSAAlgorithm.to_jwk(self._key.public_key(), as_dict=True)
        return {"keys": [{**jwk, "kid": "bench-1"}]}

    def token(
        self,
        tenant: str,
        *roles: str,
        subject: str = "bench",
        client: str = "app-1",
        claims: Mapping[str, Any] | None = None,
    ) -> str:
        """A token for ``subject`` of ``tenant`` calling from ``client``, valid for an hour;
        ``claims`` adds caller claims (a record filter's, say)."""
        now = int(time.time())
        payload = {
            **(claims or {}),
            "iss": self.issuer,
            "aud": self.audience,
            "sub": subject,
            "azp": client,
            "esra_tenant": tenant,
            "esra_roles": list(roles),
            "iat": now,
            "nbf": now,
            "exp": now + 3600,
        }
        return jwt.encode(payload, self._key, algorithm="RS256", headers={"kid": "bench-1"})


def postgres_state_settings(
    directory: Path,
    dsn: str,
    *,
    tenant: str,
    issuer: BenchIssuer,
    config_poll_s: float,
) -> Path:
    """Write the settings of a host whose ``[state]`` is the PostgreSQL database ``dsn`` names.

    The tenant starts from an empty file configuration; its state (configuration, secrets,
    audit) lives in the default state schemas of that database, which every host started
    with these settings shares. Returns the settings file.
    """
    parts = urlsplit(dsn)
    host, port = parts.hostname or "127.0.0.1", parts.port or 5432
    user = parts.username or "postgres"
    database = parts.path.lstrip("/")
    state = f"postgresql://{user}:${{secret:env:{STATE_PASSWORD_ENV}}}@{host}:{port}/{database}"
    keyring = directory / "kek.json"
    material = base64.b64encode(secrets.token_bytes(32)).decode()
    keyring.write_text(json.dumps({"active": "k1", "keys": {"k1": material}}))
    keyring.chmod(0o600)
    empty = ConfigSnapshot(tenant_id=tenant, version="file-1")
    (directory / "tenant.json").write_text(json.dumps(dump_snapshot(empty)))
    (directory / "jwks.json").write_text(json.dumps(issuer.jwks()))
    settings = directory / "esra.toml"
    settings.write_text(
        f"""
[[issuers]]
issuer = "{issuer.issuer}"
audience = "{issuer.audience}"
jwks_file = "jwks.json"
algorithms = ["RS256"]

[[tenants]]
id = "{tenant}"
config = "tenant.json"
outbound_hosts = ["{host}:{port}"]

[state]
database = "{state}"
config_poll_s = {config_poll_s!r}

[secrets]
keyring_file = "kek.json"

[audit]
kind = "database"
"""
    )
    return settings


def state_password_env(dsn: str) -> dict[str, str]:
    """The environment a host started with ``postgres_state_settings(dsn)`` needs."""
    # Trust authentication ignores the password, but the reference must still resolve.
    return {STATE_PASSWORD_ENV: urlsplit(dsn).password or "unused-by-trust-auth"}


@attrs.frozen
class ServeHost:
    """A running ``esra serve`` process."""

    name: str
    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:]


def _healthy(port: int) -> bool:
    with contextlib.suppress(OSError):
        probe = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        try:
            probe.request("GET", "/healthz")
            return probe.getresponse().status == 200
        finally:
            probe.close()
    return False


@contextlib.contextmanager
def serve_host(
    name: str,
    settings: Path,
    log: Path,
    *,
    env: dict[str, str] | None = None,
    preamble: Sequence[str] = (),
    options: Sequence[str] = (),
    launcher: Sequence[str] = (),
    start_timeout_s: float = START_TIMEOUT_S,
) -> Iterator[ServeHost]:
    """``esra serve --config settings`` on a free port until the block ends.

    ``preamble``: Python statements run in the host process before the command line does
    (a bench's way to change one component of an otherwise unchanged host). ``options``:
    more ``esra serve`` options (``--workers 2``). ``launcher``: a command the interpreter
    runs under (``valgrind --tool=callgrind``), the process keeping its PID.

    Raises:
        RuntimeError: the process exited, or did not answer ``/healthz``, within
            ``start_timeout_s`` (a minute by default).
    """
    port = free_port()
    code = "\n".join(
        ["import sys", *preamble, "from esra.starlette._cli import main", "sys.exit(main())"]
    )
    argv = [*launcher, sys.executable, "-c", code, "serve", "--port", str(port)]
    argv += ["--config", str(settings)]
    argv += options
    environment = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    with log.open("ab") as sink:
        process = subprocess.Popen(  # noqa: S603 - our own interpreter and CLI
            argv, stdout=sink, stderr=subprocess.STDOUT, env=environment
        )
    host = ServeHost(name, process, port, log)
    try:
        deadline = time.monotonic() + start_timeout_s
        while not _healthy(port):
            if process.poll() is not None or time.monotonic() > deadline:
                msg = f"esra serve ({name}) did not start:\n{host.log_tail()}"
                raise RuntimeError(msg)
            time.sleep(0.1)
        yield host
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextlib.contextmanager
def redis_keys(redis_url: str, prefix: str) -> Iterator[Callable[[], int]]:
    """A count of the Redis keys under ``prefix`` (a run's own); they are deleted when the
    block ends."""
    import redis  # noqa: PLC0415 - installed with esra-redis, which [redis] needs anyway

    client = redis.Redis.from_url(redis_url)
    pattern = f"{prefix}*"
    try:
        yield lambda: sum(1 for _ in client.scan_iter(match=pattern, count=500))
    finally:
        for key in list(client.scan_iter(match=pattern, count=500)):
            client.delete(key)
        client.close()
