"""Live-database test DSNs: skip locally when unset or unreachable, fail under ``CI=true``.

``ESRA_TEST_POSTGRES_DSN``, ``ESRA_TEST_MYSQL_DSN``, ``ESRA_TEST_SQLSERVER_DSN`` and
``ESRA_TEST_ORACLE_DSN`` name the servers. PostgreSQL and MySQL run on CI's machine, so
under ``CI=true`` their absence is a failure; SQL Server and Oracle live suites only run
where a DSN is given.
"""

from __future__ import annotations

import os

import pytest

__all__ = ["MUST_RUN_IN_CI", "require_dsn", "unreachable"]

MUST_RUN_IN_CI = frozenset({"ESRA_TEST_POSTGRES_DSN", "ESRA_TEST_MYSQL_DSN"})


def unreachable(variable: str, reason: str) -> None:
    """Skip (or fail, under CI for a must-run server) because the server cannot be used."""
    if os.environ.get("CI") == "true" and variable in MUST_RUN_IN_CI:
        pytest.fail(f"{variable}: {reason} (CI=true requires this server)")
    pytest.skip(f"{variable}: {reason}")


def require_dsn(variable: str) -> str:
    """Return the DSN in ``variable`` or skip / fail as ``unreachable`` says."""
    dsn = os.environ.get(variable, "").strip()
    if not dsn:
        unreachable(variable, "not set")
    return dsn
