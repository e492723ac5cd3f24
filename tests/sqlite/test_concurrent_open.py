"""Two stores opening one new SQLite file together: both get a working connection.

The attack (found by a CI run): switching a fresh file to WAL needs an exclusive lock, and
SQLite answers "database is locked" at once instead of waiting the busy timeout while the
other store applies its schema, so of two stores opened on one new file at the same moment
one failed about once in sixty. Many rounds of two stores racing on fresh files must all end
as the stores' contract says: one save stored, the other a version conflict.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from esra.core._admin.store import ConfigChange, ConfigConflictError
from esra.core._admin.workspace import AdminWorkspace
from esra.core.testing.config_contract import T0, contract_snapshot
from esra.sqlite._config_store import SqliteConfigStore

ROUNDS = 300
TENANT = "tenant-a"


async def _race(database: Path) -> list[str]:
    one, two = SqliteConfigStore(database), SqliteConfigStore(database)
    first = AdminWorkspace(tenant_id=TENANT).next(snapshot=contract_snapshot())
    other = AdminWorkspace(tenant_id=TENANT).next()
    try:
        outcomes = await asyncio.gather(
            one.save(first, expected_version=0, change=ConfigChange(TENANT, 1, "a", T0, "x", "y")),
            two.save(other, expected_version=0, change=ConfigChange(TENANT, 1, "b", T0, "x", "y")),
            return_exceptions=True,
        )
    finally:
        await one.close()
        await two.close()
    return sorted("stored" if o is None else type(o).__name__ for o in outcomes)


async def test_two_stores_opening_one_fresh_file_never_fail_to_open(tmp_path: Path) -> None:
    """Every round: one save stored, one conflict — never "database is locked"."""
    for round_number in range(ROUNDS):
        outcome = await _race(tmp_path / f"config-{round_number}.db")
        assert outcome == sorted(["stored", ConfigConflictError.__name__]), (round_number, outcome)
