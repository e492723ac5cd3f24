"""Every way to run the project: demo, tests, integration, typecheck, lint, bench."""

from __future__ import annotations

import os
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
]
TEST_DEPENDENCIES = ["pytest>=8", "pytest-asyncio>=0.24", "hypothesis>=6.100"]


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
    _install_workspace(session)
    for script in sorted((ROOT / "bench").glob("*.py")):
        if not script.name.startswith("_"):
            session.run("python", str(script), *session.posargs)
