"""The result cache keys on the configuration's content, not only on its version string.

A version string is not unique across producers of configuration: the settings file names
its own (an operator may edit the file and keep it), and the admin workspace numbers its
publications 1, 2, 3… — a file whose version is ``"3"`` and workspace version 3 differ in
content. Seed 003 (Caching): a change in configuration invalidates the relevant entries
automatically. So the key carries a digest of the configuration the response was computed
from, and an entry made under other content is never served, whatever the version says.
"""

from __future__ import annotations

from datetime import UTC, datetime

import attrs

from esra.core._admin.store import adopt
from esra.core._durable_config import DurableConfigRepository
from esra.core._pipeline.cache_keys import configuration_fingerprint, result_cache_key
from esra.core._retriever import Retriever
from esra.core._static_config import StaticConfigRepository
from esra.core.admin import DataModelService, ExposureService, InMemoryWorkspaceStore, Role
from esra.core.config import ConfigSnapshot, RecordFilter
from esra.core.fetch import Keyring
from esra.core.ports import ConfigRepository
from esra.core.testing import (
    FakeClock,
    FakeLanguageModel,
    InMemoryAuditSink,
    InMemoryCache,
    InMemoryConfigRepository,
)
from tests.core.admin.test_chain import holder
from tests.core.test_result_cache import REQUEST, A, _CountingProvider, _ctx, _mapping, _snapshot

NORTH_ROW = "AARDVARK leave policy north"
TIGHTENED = (
    RecordFilter(field="region", claim="region"),
    RecordFilter(field="region", claim="clearance"),  # a claim the caller does not hold
)


def _tightened(snapshot: ConfigSnapshot) -> ConfigSnapshot:
    mapping = attrs.evolve(_mapping(A), record_filters=TIGHTENED)
    return attrs.evolve(snapshot, mappings=(mapping,))


def _retriever(
    config: ConfigRepository, clock: FakeClock, cache: InMemoryCache, provider: _CountingProvider
) -> Retriever:
    return Retriever(
        config=config,
        providers={"s-1": provider},
        model=FakeLanguageModel(),
        audit=InMemoryAuditSink(),
        clock=clock,
        cache=cache,
        keyring=Keyring.generate("k1"),
        tenant_id=A,
    )


async def test_a_publication_reusing_the_file_version_misses_the_files_entries() -> None:
    clock = FakeClock()
    file_snapshot = _snapshot(A, version="3")  # the settings file's configuration, "3"
    store = InMemoryWorkspaceStore()
    runtime = DurableConfigRepository(store, fallback=StaticConfigRepository([file_snapshot]))
    cache, provider = InMemoryCache(clock), _CountingProvider(A)
    retriever = _retriever(runtime, clock, cache, provider)
    before = await retriever.retrieve(_ctx(A), REQUEST)
    assert [r.title for r in before.results] == [NORTH_ROW]

    # An administrator tightens record-level security and publishes: workspace version 3.
    audit = InMemoryAuditSink()
    await adopt(store, file_snapshot, subject="host", at=datetime(2026, 1, 1, tzinfo=UTC))
    data = DataModelService(store, audit=audit, clock=clock)
    await data.model_source(
        holder(Role.ESRA_DATA_MANAGE, A),
        A,
        file_snapshot.sources[0],
        [attrs.evolve(_mapping(A), record_filters=TIGHTENED)],
    )
    exposures = ExposureService(store, runtime, audit=audit, clock=clock)
    await exposures.publish(
        holder(Role.ESRA_EXPOSURE_MANAGE, A), A, file_snapshot.exposures[0].slug
    )
    served = await runtime.snapshot(A)
    assert served is not None
    assert served.version == file_snapshot.version  # the collision this test is about
    assert served.mappings[0].record_filters == TIGHTENED

    after = await retriever.retrieve(_ctx(A, correlation_id="after"), REQUEST)

    assert after.results == ()
    # The tightened answer is not cached: it is degraded.
    held = cache.keys()
    assert len([key for key in held if ":result:" in key]) == 1


async def test_a_settings_file_changed_under_the_same_version_misses() -> None:
    clock = FakeClock()
    config = InMemoryConfigRepository([_snapshot(A, version="2026-01")])
    cache, provider = InMemoryCache(clock), _CountingProvider(A)
    retriever = _retriever(config, clock, cache, provider)
    before = await retriever.retrieve(_ctx(A), REQUEST)
    assert [r.title for r in before.results] == [NORTH_ROW]

    config.put(_tightened(_snapshot(A, version="2026-01")))  # edited, version kept
    after = await retriever.retrieve(_ctx(A, correlation_id="after"), REQUEST)

    assert after.results == ()
    assert provider.calls == 1  # the tightened source was dropped before any query


async def test_the_same_configuration_rebuilt_still_hits() -> None:
    # The digest is of content, not of objects: a snapshot reloaded (another host, a
    # restart, a follower's poll) with the same content addresses the same entries.
    clock = FakeClock()
    config = InMemoryConfigRepository([_snapshot(A, version="7")])
    cache, provider = InMemoryCache(clock), _CountingProvider(A)
    retriever = _retriever(config, clock, cache, provider)
    await retriever.retrieve(_ctx(A), REQUEST)

    config.put(_snapshot(A, version="7"))
    again = await retriever.retrieve(_ctx(A, correlation_id="again"), REQUEST)

    assert [r.title for r in again.results] == [NORTH_ROW]
    assert provider.calls == 1


def test_the_result_key_changes_with_the_configuration_fingerprint() -> None:
    plain, tightened = _snapshot(A), _tightened(_snapshot(A))
    fingerprints = {configuration_fingerprint(s.mappings) for s in (plain, tightened)}
    assert len(fingerprints) == 2
    assert configuration_fingerprint(plain.mappings) == configuration_fingerprint(
        _snapshot(A).mappings
    )
    keys = {
        result_cache_key(
            tenant_id=A,
            client_app_id="app-1",
            capability_id="cap-1",
            exposure_id="exp-1",
            config_version="3",
            configuration=fingerprint,
            authorization="auth",
            request=REQUEST,
            generation="g",
        )
        for fingerprint in fingerprints
    }
    assert len(keys) == 2
