"""Enabling or initialising a store, killed (``kill -9``) before its record, is audited, on a
PostgreSQL state database (see tests/sqlite/test_store_lifecycle_audit_killed.py)."""

from __future__ import annotations

import pytest

from esra.postgres import PostgresConfigStore
from tests._killed_lifecycle_action import (
    ACTIONS,
    assert_applied_and_delivered,
    assert_concluded_once,
    enabled,
    kill_initialisation_after_its_schema,
    kill_lifecycle_action_at_record,
)
from tests.postgres.test_config_store import config_schema  # noqa: F401 - the fixture

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("action", ACTIONS)
async def test_a_lifecycle_action_killed_before_its_record_is_audited(
    pg_dsn: str,
    config_schema: str,  # noqa: F811 - the imported fixture
    action: str,
) -> None:
    table = await PostgresConfigStore.open(pg_dsn, schema=config_schema, max_size=1)
    try:
        if action == "initialise":
            await enabled(table)
        kill_lifecycle_action_at_record("postgres", pg_dsn, action, config_schema)
        await assert_applied_and_delivered(table, action)
    finally:
        await table.close()


async def test_an_initialisation_killed_after_its_schema_is_concluded_once(
    pg_dsn: str,
    config_schema: str,  # noqa: F811 - the imported fixture
) -> None:
    table = await PostgresConfigStore.open(pg_dsn, schema=config_schema, max_size=1)
    try:
        await enabled(table)
        kill_initialisation_after_its_schema("postgres", pg_dsn, config_schema)
        await assert_concluded_once(table)
    finally:
        await table.close()
