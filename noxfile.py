"""Every way to run the project: demo, tests, integration, typecheck, lint, bench."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import tomllib
import urllib.request
import zipfile
from pathlib import Path

import nox

nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = False
nox.options.error_on_missing_interpreters = True

ROOT = Path(__file__).parent
DISTRIBUTIONS = [
    "packages/esra-core[documents]",
    "adapters/esra-sql",
    "adapters/esra-sqlite",
    "adapters/esra-llm",
    "adapters/esra-starlette",
    "adapters/esra-postgres",
    "adapters/esra-mysql",
    "adapters/esra-sqlserver",
    "adapters/esra-oracle",
    "adapters/esra-redis",
]
# playwright drives Debian's chromium (/usr/bin/chromium) in the portal's browser tests; pip
# never downloads a browser for it.
# sqlglot parses every statement the SQL Server and Oracle providers render (no such server
# runs here); pinned, because its dialects' leniency changes between releases.
TEST_DEPENDENCIES = [
    # pytest-asyncio 1.4 is the first that does not leak the event loop it creates for the
    # loop policy (its sockets' ResourceWarning then fails a later test); it needs pytest 8.4.
    "pytest>=8.4",
    "pytest-asyncio>=1.4",
    "hypothesis>=6.100",
    "playwright>=1.49",
    "sqlglot==30.31.0",
    # The in-memory span exporter and metric reader the telemetry tests read back.
    "opentelemetry-sdk>=1.40",
    # esra serve's [telemetry] export, driven against a fake collector in the tests.
    "opentelemetry-exporter-otlp-proto-http>=1.40",
    # tests/realdata seeds MariaDB through PyMySQL; esra-mysql itself no longer uses it.
    "PyMySQL>=1.1",
]


def _install_workspace(session: nox.Session, *extra: str) -> None:
    # Editable installs of every distribution, so tests and mypy see the working tree.
    args = [arg for dist in DISTRIBUTIONS for arg in ("-e", dist)]
    session.install(*args, *extra)


def _shared_data_env() -> dict[str, str]:
    default = ROOT.parent / "shared" / "data"
    return {"ESRA_SHARED_DATA": os.environ.get("ESRA_SHARED_DATA", str(default))}


@nox.session
def demo(session: nox.Session) -> None:
    """Run `esra demo` on the embedded default (SQLite, offline model); a question may follow --."""
    _install_workspace(session)
    session.run("esra", "demo", *session.posargs)


@nox.session
def tests(session: nox.Session) -> None:
    """Run the whole test suite (unit, property, contract and the live-server integration tests)."""
    _install_workspace(session, *TEST_DEPENDENCIES)
    session.run("pytest", *session.posargs, env=_shared_data_env())


@nox.session
def integration(session: nox.Session) -> None:
    """Run only the integration tests (real SQLite files; later PostgreSQL and MariaDB)."""
    _install_workspace(session, *TEST_DEPENDENCIES)
    session.run("pytest", "-m", "integration", *session.posargs, env=_shared_data_env())


@nox.session
def realdata(session: nox.Session) -> None:
    """Seed Chinook and AdventureWorks into SQLite, PostgreSQL and MariaDB; compare the engines."""
    _install_workspace(session, *TEST_DEPENDENCIES)
    session.run("pytest", "tests/realdata", *session.posargs, env=_shared_data_env())


@nox.session
def typecheck(session: nox.Session) -> None:
    """Run mypy in strict mode over every distribution, the tests and the benchmarks."""
    # types-PyMySQL for tests/realdata's seeding; mysql-connector-python ships its own types.
    stubs = ["types-defusedxml", "types-PyMySQL"]
    _install_workspace(session, *TEST_DEPENDENCIES, *stubs, "mypy==2.4.1", "nox")
    session.run("mypy", "packages", "adapters", "tests", "bench", "noxfile.py")


@nox.session
def lint(session: nox.Session) -> None:
    """Run ruff's linter and formatter check over the whole tree."""
    session.install("ruff==0.17.6")  # pinned: formatting must not drift between runs
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def bench(session: nox.Session) -> None:
    """Run the benchmarks in bench/ and print their ratios against the side-by-side baseline."""
    # bm25s (Lucene BM25) with PyStemmer's Porter stemmer is the retrieval-quality baseline
    # only; no distribution depends on either. The embeddings extra adds the "esra-local-
    # embeddings" ranking; torch is pinned to the CPU build this machine installs from local
    # disk (a bare torch would pull a CUDA build).
    # puremagic only for bench/magic_detection.py's comparison; ESRA detects types itself.
    _install_workspace(
        session,
        "bm25s",
        "PyStemmer",
        "puremagic",
        # bench/host_load.py --tracing installs the SDK in the serving process.
        "opentelemetry-sdk>=1.40",
        "torch==2.13.0",
        "-e",
        "adapters/esra-llm[embeddings]",
        # esra serve's production stack: uvloop and httptools (host_load reports which ran).
        "-e",
        "adapters/esra-starlette[speedups]",
    )
    for script in sorted((ROOT / "bench").glob("*.py")):
        if not script.name.startswith("_"):
            session.run("python", str(script), *session.posargs)


# The official MCP conformance suite. 0.2.0-alpha.12 is the first line with `server-stateless`;
# it needs Node 22 (`fs.globSync`), which npx takes from the npm package `node`, whatever the
# machine's own node is. Both pinned, so the verdict cannot drift between runs.
CONFORMANCE_PACKAGE = "@modelcontextprotocol/conformance@0.2.0-alpha.12"
CONFORMANCE_NODE = "node@22.23.3"
CONFORMANCE_SCENARIOS = (
    "server-initialize",
    "ping",
    "tools-list",
    "dns-rebinding-protection",
    "server-stateless",
)
CONFORMANCE_BASELINE = ROOT / ".ci" / "conformance-expected-failures.yml"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _wait_healthy(url: str, server: subprocess.Popen[bytes], timeout_s: float = 60) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and server.poll() is None:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - loopback
                if response.status == 200:
                    return True
        except OSError:
            time.sleep(0.25)
    return False


@nox.session
def conformance(session: nox.Session) -> None:
    """Run the official MCP conformance suite's server scenarios against a live `esra serve`."""
    # With the speedups extra: the suite holds the uvloop/httptools host to the protocol, as
    # the tests session holds the asyncio/h11 one.
    _install_workspace(session, "-e", "adapters/esra-starlette[speedups]")
    npx = shutil.which("npx")
    if npx is None:
        session.error("npx not found: install Node.js and npm")
    scratch = Path(tempfile.mkdtemp(prefix="esra-conformance-"))
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    log_path = scratch / "serve.log"
    # The suite cannot send a bearer token: --insecure-dev-anonymous (embedded default on
    # loopback only) serves token-less calls as the development caller `dev-anonymous`.
    command = [str(Path(session.bin) / "esra"), "serve", "--host", "127.0.0.1"]
    command += ["--port", str(port), "--data-dir", str(scratch / "home")]
    command += ["--insecure-dev-anonymous"]
    env = {**os.environ, "npm_config_loglevel": "error", "npm_config_update_notifier": "false"}
    failed: list[str] = []
    with log_path.open("wb") as log:
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)  # noqa: S603
        try:
            if not _wait_healthy(f"{base}/healthz", server):
                session.error(f"esra serve did not come up:\n{log_path.read_text()}")
            for scenario in CONFORMANCE_SCENARIOS:
                session.log(f"conformance scenario {scenario}")
                args = [npx, "--yes", "-p", CONFORMANCE_NODE, "-p", CONFORMANCE_PACKAGE, "--"]
                args += ["conformance", "server", "--url", f"{base}/mcp"]
                args += ["--scenario", scenario, "--expected-failures", str(CONFORMANCE_BASELINE)]
                if subprocess.run(args, env=env, check=False, timeout=300).returncode != 0:  # noqa: S603
                    failed.append(scenario)
        finally:
            server.terminate()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
    if failed:
        session.error(f"conformance failed: {', '.join(failed)} (server log: {log_path})")
    shutil.rmtree(scratch, ignore_errors=True)
    session.log(f"conformance: {len(CONFORMANCE_SCENARIOS)} scenarios passed")


# One MCP search through the installed wheels: a dev token, the SDK's client, one tool call.
_WHEEL_MCP_CALL = """
import asyncio, subprocess, sys
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

url, home = sys.argv[1], sys.argv[2]
token = subprocess.run(
    ["esra", "dev-token", "--tenant", "larkspur", "--subject", "wheel-check",
     "--claim", "region=emea", "--data-dir", home],
    check=True, capture_output=True, text=True,
).stdout.strip()

async def main() -> None:
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http, Client(
        streamable_http_client(url, http_client=http)
    ) as client:
        result = await client.call_tool("esra_larkspur", {"prompt": "parental leave policy"})
    assert not result.is_error, result.content
    assert result.structured_content and result.structured_content["results"], result
    print("MCP call through the wheels:", len(result.structured_content["results"]), "results")

asyncio.run(main())
"""


def _distribution_paths() -> list[Path]:
    return [ROOT / dist.split("[", 1)[0] for dist in DISTRIBUTIONS]


@nox.session
def wheels(session: nox.Session) -> None:
    """Build every distribution's wheel, install only the wheels into this fresh virtual
    environment, and run `esra demo`, `esra serve` and one MCP call through them."""
    built = Path(tempfile.mkdtemp(prefix="esra-wheels-"))
    session.install("pip>=24")
    for path in _distribution_paths():
        session.run("python", "-m", "pip", "wheel", "--no-deps", "-w", str(built), str(path))
    wheel_files = sorted(str(w) for w in built.glob("*.whl"))
    if len(wheel_files) != len(DISTRIBUTIONS):
        session.error(f"expected {len(DISTRIBUTIONS)} wheels, built {len(wheel_files)}")
    for wheel in wheel_files:
        with zipfile.ZipFile(wheel) as archive:
            if not any(name.endswith("/licenses/LICENSE") for name in archive.namelist()):
                session.error(f"{Path(wheel).name} carries no LICENSE")
    # The wheels only: no source tree on the path, third-party dependencies from the index.
    session.install(*wheel_files, "esra-core[documents]", "esra-starlette[speedups]")
    scratch = Path(tempfile.mkdtemp(prefix="esra-wheel-run-"))
    home = scratch / "home"
    session.chdir(scratch)
    session.run("esra", "demo", "parental leave policy", env={"ESRA_HOME": str(home)})
    port = _free_port()
    log_path = scratch / "serve.log"
    command = [str(Path(session.bin) / "esra"), "serve", "--host", "127.0.0.1"]
    command += ["--port", str(port), "--data-dir", str(home)]
    with log_path.open("wb") as log:
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)  # noqa: S603
        try:
            if not _wait_healthy(f"http://127.0.0.1:{port}/healthz", server):
                session.error(f"esra serve did not come up:\n{log_path.read_text()}")
            session.run("python", "-c", _WHEEL_MCP_CALL, f"http://127.0.0.1:{port}/mcp", str(home))
        finally:
            server.terminate()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.rmtree(built, ignore_errors=True)


def _declared_requirements() -> list[str]:
    """Every third-party requirement the distributions declare (their own extras included),
    so that resolving them as direct requirements puts each at its lowest allowed version."""
    requirements: list[str] = []
    for path in _distribution_paths():
        project = tomllib.loads((path / "pyproject.toml").read_text(encoding="utf-8"))["project"]
        declared = list(project.get("dependencies", []))
        for name, extra in project.get("optional-dependencies", {}).items():
            if name not in {"embeddings"}:  # torch's lowest is no CPU build on this disk
                declared.extend(extra)
        requirements.extend(r for r in declared if not r.startswith("esra-"))
    return sorted(set(requirements))


@nox.session
def lowest(session: nox.Session) -> None:
    """Install every distribution with each declared dependency at its lowest allowed
    version (uv's lowest-direct resolution) and run the unit suite against them."""
    session.install("uv")
    editable = [arg for dist in DISTRIBUTIONS for arg in ("-e", str(ROOT / dist))]
    session.run(
        "uv", "pip", "install", "--python", str(Path(session.bin) / "python"),
        "--resolution", "lowest-direct", *editable, *_declared_requirements(),
        *TEST_DEPENDENCIES,
    )  # fmt: skip
    session.run("uv", "pip", "list", "--python", str(Path(session.bin) / "python"))
    session.run(
        "pytest", "-m", "not integration", "-p", "no:cacheprovider", *session.posargs,
        env=_shared_data_env(),
    )  # fmt: skip
