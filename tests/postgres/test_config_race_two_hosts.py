"""Two hosts on one PostgreSQL configuration schema racing the chain, and a failed publication.

Each host is its own ``PostgresConfigStore`` (its own pool) over the same schema, with its own
services and runtime, as two ``esra serve`` processes are.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import psycopg
import pytest
from psycopg import sql

from esra.core._static_config import StaticConfigRepository
from esra.core.admin import (
    AdminWorkspace,
    ConfigConflictError,
    DataModelService,
    ExposureService,
    Role,
)
from esra.core.testing import FakeClock, InMemoryAuditSink
from esra.postgres._config_schema import apply_config_schema
from esra.postgres._config_store import PostgresConfigStore
from tests.core.admin.test_chain import Admin, holder, run_until
from tests.core.factories import SLUG, TENANT, make_source

pytestmark = [pytest.mark.postgres, pytest.mark.integration]


@pytest.fixture
async def config_schema(pg_dsn: str) -> AsyncIterator[str]:
    """A freshly applied configuration schema, dropped afterwards."""
    schema = f"esra_test_config_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        assert await apply_config_schema(conn, schema)
    yield schema
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        await conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture
async def two_hosts(
    pg_dsn: str, config_schema: str
) -> AsyncIterator[tuple[PostgresConfigStore, PostgresConfigStore]]:
    first = await PostgresConfigStore.open(pg_dsn, schema=config_schema, max_size=2)
    second = await PostgresConfigStore.open(pg_dsn, schema=config_schema, max_size=2)
    try:
        yield first, second
    finally:
        await first.close()
        await second.close()


async def test_an_edit_racing_a_publish_on_another_host_is_never_published_unseen(
    two_hosts: tuple[PostgresConfigStore, PostgresConfigStore],
) -> None:
    """Both name the version the publisher reviewed: one wins, and the stored publication is
    exactly a reviewed draft — never one holding the other host's edit."""
    first, second = two_hosts
    h = Admin(store=first)
    await run_until(h, 4)
    audit, clock = InMemoryAuditSink(), FakeClock()
    runtime = StaticConfigRepository()
    publishing = ExposureService(first, runtime, audit=audit, clock=clock)
    editing = DataModelService(second, audit=audit, clock=clock)
    for _round in range(5):
        reviewed = await first.load(TENANT)
        assert reviewed is not None
        published_before = (await second.published_versions())[TENANT]
        outcomes = await asyncio.gather(
            publishing.publish(
                holder(Role.ESRA_EXPOSURE_MANAGE),
                TENANT,
                SLUG,
                expected_version=reviewed.version,
            ),
            editing.model_source(
                holder(Role.ESRA_DATA_MANAGE),
                TENANT,
                make_source("s-1", description=f"Edited after review {_round}."),
                expected_version=reviewed.version,
            ),
            return_exceptions=True,
        )
        winners = [o for o in outcomes if isinstance(o, AdminWorkspace)]
        conflicts = [o for o in outcomes if isinstance(o, ConfigConflictError)]
        assert (len(winners), len(conflicts)) == (1, 1), outcomes
        latest = (await second.published_versions())[TENANT]
        published = await second.published_at(TENANT, latest)
        assert published is not None
        assert f"Edited after review {_round}." not in str(published.sources)
        if isinstance(outcomes[0], AdminWorkspace):
            assert latest == reviewed.version + 1
            # The snapshot published is the reviewed draft, one version on.
            assert published.sources == reviewed.snapshot.sources
            assert await runtime.snapshot(TENANT) == published
        else:
            assert latest == published_before


async def test_a_publication_whose_second_write_fails_leaves_nothing_saved_or_served(
    pg_dsn: str, two_hosts: tuple[PostgresConfigStore, PostgresConfigStore], config_schema: str
) -> None:
    """The workspace row is written, then the publication row fails: the whole save rolls
    back, the runtime is not handed it, and the other host sees the old publication."""
    first, second = two_hosts
    h = Admin(store=first)
    await run_until(h, 4)
    before = await second.load(TENANT)
    assert before is not None
    published_before = await second.published_versions()
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        await conn.execute(
            sql.SQL(
                "CREATE FUNCTION {fn}() RETURNS trigger LANGUAGE plpgsql AS"
                " $$ BEGIN RAISE EXCEPTION 'the disk is gone'; END $$;"
                " CREATE TRIGGER fail_publication BEFORE INSERT ON {table}"
                " FOR EACH ROW EXECUTE FUNCTION {fn}()"
            ).format(
                fn=sql.Identifier(config_schema, "fail_publication"),
                table=sql.Identifier(config_schema, "published"),
            )
        )
    runtime = StaticConfigRepository()
    audit = InMemoryAuditSink()
    service = ExposureService(first, runtime, audit=audit, clock=FakeClock())
    with pytest.raises(psycopg.Error):
        await service.publish(holder(Role.ESRA_EXPOSURE_MANAGE), TENANT, SLUG)
    assert await runtime.snapshot(TENANT) is None
    assert await second.load(TENANT) == before
    assert await second.published_versions() == published_before
    assert [c.version for c in await second.history(TENANT)][-1] == before.version
    assert [r.outcome for r in audit.records] == ["failed"]
