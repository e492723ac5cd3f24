"""Enabling or initialising a store, killed (``kill -9``) before its record, is audited.

``StoreLifecycle`` wrote the shared state (Enabled, Initializing) and only then handed its
record to the sink: a process killed in between left every process seeing the new state and
no record anywhere. The record is now written with the state into the state database's
audit outbox, and delivered from there by the next forward.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from esra.sqlite import SqliteConfigStore
from tests._killed_lifecycle_action import (
    ACTIONS,
    assert_applied_and_delivered,
    assert_concluded_once,
    enabled,
    kill_initialisation_after_its_schema,
    kill_lifecycle_action_at_record,
)

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("action", ACTIONS)
async def test_a_lifecycle_action_killed_before_its_record_is_audited(
    tmp_path: Path, action: str
) -> None:
    database = tmp_path / "state.db"
    table = SqliteConfigStore(database)
    try:
        await table.initialize()
        if action == "initialise":
            await enabled(table)
    finally:
        await table.close()

    kill_lifecycle_action_at_record("sqlite", str(database), action)

    table = SqliteConfigStore(database)
    try:
        await assert_applied_and_delivered(table, action)
    finally:
        await table.close()


async def test_an_initialisation_killed_after_its_schema_is_concluded_once(tmp_path: Path) -> None:
    """Killed between its DDL and its outcome, an initialisation left Initializing and its
    "started" record only: the processes that found the schema showed Ready and wrote no
    outcome anywhere."""
    database = tmp_path / "state.db"
    table = SqliteConfigStore(database)
    try:
        await table.initialize()
        await enabled(table)
    finally:
        await table.close()

    kill_initialisation_after_its_schema("sqlite", str(database))

    table = SqliteConfigStore(database)
    try:
        await assert_concluded_once(table)
    finally:
        await table.close()
