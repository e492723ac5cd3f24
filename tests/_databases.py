"""Live-database test DSNs: skip locally when unset or unreachable, fail under ``CI=true``.

``ESRA_TEST_POSTGRES_DSN``, ``ESRA_TEST_MYSQL_DSN``, ``ESRA_TEST_SQLSERVER_DSN`` and
``ESRA_TEST_ORACLE_DSN`` name the servers. PostgreSQL and MySQL run on CI's machine, so
under ``CI=true`` their absence is a failure; SQL Server and Oracle live suites only run
where a DSN is given.

A newcomer's machine often runs PostgreSQL and MariaDB locally already: when the variable is
unset and the server's usual local port answers, the usual local DSN (``LOCAL_DEFAULTS``) is
used, so their suites run instead of silently skipping. A server there that refuses those
credentials still skips locally, with the reason in the summary.
"""

from __future__ import annotations

import os
import socket
from urllib.parse import urlsplit

import pytest

__all__ = ["LOCAL_DEFAULTS", "MUST_RUN_IN_CI", "require_dsn", "unreachable"]

MUST_RUN_IN_CI = frozenset({"ESRA_TEST_POSTGRES_DSN", "ESRA_TEST_MYSQL_DSN"})
LOCAL_DEFAULTS = {
    "ESRA_TEST_POSTGRES_DSN": "postgresql://postgres@127.0.0.1:5432/test",
    "ESRA_TEST_MYSQL_DSN": "mysql://root@127.0.0.1:3306/test",
}


def unreachable(variable: str, reason: str) -> None:
    """Skip (or fail, under CI for a must-run server) because the server cannot be used."""
    if os.environ.get("CI") == "true" and variable in MUST_RUN_IN_CI:
        pytest.fail(f"{variable}: {reason} (CI=true requires this server)")
    pytest.skip(f"{variable}: {reason}")


def _answers(dsn: str) -> bool:
    parts = urlsplit(dsn)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 0), 0.5):
            return True
    except OSError:
        return False


def require_dsn(variable: str) -> str:
    """Return the DSN in ``variable`` — else the local default when its port answers — or
    skip / fail as ``unreachable`` says."""
    dsn = os.environ.get(variable, "").strip()
    if not dsn and variable in LOCAL_DEFAULTS and _answers(LOCAL_DEFAULTS[variable]):
        dsn = LOCAL_DEFAULTS[variable]
    if not dsn:
        unreachable(variable, "not set, and nothing answers at its usual local address")
    return dsn
