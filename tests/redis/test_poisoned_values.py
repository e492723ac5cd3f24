"""Values read back from Redis that ESRA did not write: skipped or missed, never fatal.

Whoever can write to the shared Redis (another application on it, a stale deployment) can
leave a value of any shape under ESRA's keys or publish one on its channel. Found by a
hostile review: an integer too large for a float or JSON nested past the decoder's recursion
limit — both within the reader's size bound — ended a host's breaker subscription for good,
or failed every search asking one question until the selection entry expired.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime

import pytest
from redis.asyncio import Redis

from esra.core._pipeline.cache_keys import SELECTION_TTL_S, selection_cache_key
from esra.core.ports import BreakerOpening
from esra.core.testing import FakeClock
from esra.redis import RedisBreakerBroadcast, RedisCache
from tests.core.test_selection import (
    REQUEST,
    _answer,
    _ids,
    _scope,
    _select,
    _selection_configuration,
)
from tests.redis.test_breaker_broadcast import listening, start

pytestmark = [pytest.mark.redis, pytest.mark.integration]

T0 = datetime(2026, 3, 4, 12, 0, tzinfo=UTC)

# Both fit the reader's 6,144-byte bound and the 4,300-digit integer bound it relies on.
_HUGE_UNTIL = b'{"tenant":"acme","source":"crm","until_ms":1' + b"0" * 400 + b"}"
_DEEP_JSON = b"[" * 5000


def _broadcast(client: Redis, namespace: str, clock: FakeClock) -> RedisBreakerBroadcast:
    return RedisBreakerBroadcast(client, clock=clock, prefix=namespace, channel=namespace + "ch")


@pytest.mark.parametrize("raw", [_HUGE_UNTIL, _DEEP_JSON], ids=["until_ms-overflow", "deep-json"])
async def test_a_poisoned_breaker_announcement_does_not_end_the_subscription(
    client: Redis, other_client: Redis, namespace: str, raw: bytes
) -> None:
    """README: malformed messages "are skipped" and ``openings()`` "never ends by itself".

    An announcement whose ``until_ms`` is an integer too large for a float (OverflowError in
    ``left_ms / 1000``) or whose JSON nests deeper than the recursion limit (RecursionError)
    ended the iterator: the host's ``follow_openings`` task died and the host stopped
    applying every other host's breaker openings until it restarted.
    """
    clock = FakeClock(T0)
    async with contextlib.aclosing(_broadcast(client, namespace, clock).openings()) as it:
        first = await start(it)
        await listening(other_client, namespace)
        await other_client.publish(namespace + "ch", raw)
        await _broadcast(other_client, namespace, clock).opened("acme", "good", 5.0)

        assert await first == BreakerOpening(tenant_id="acme", source_id="good", open_for_s=5.0)


@pytest.mark.parametrize("raw", [_HUGE_UNTIL, _DEEP_JSON], ids=["until_ms-overflow", "deep-json"])
async def test_a_poisoned_breaker_key_does_not_stop_every_host_reading_openings(
    client: Redis, other_client: Redis, namespace: str, raw: bytes
) -> None:
    """The same value left in a breaker KEY is read by the SCAN of every host that starts or
    reconnects: the iterator ends at once, so no host can follow openings while it lives."""
    clock = FakeClock(T0)
    await other_client.set(namespace + "poison", raw, px=30_000)
    await _broadcast(other_client, namespace, clock).opened("acme", "good", 5.0)
    async with contextlib.aclosing(_broadcast(client, namespace, clock).openings()) as it:
        async with asyncio.timeout(5):
            opening = await anext(it)

    assert opening == BreakerOpening(tenant_id="acme", source_id="good", open_for_s=5.0)


async def test_a_deeply_nested_selection_cache_entry_is_a_miss(
    client: Redis, namespace: str
) -> None:
    """Cache "performance fails open": an unreadable selection entry is a miss (as
    ``test_a_corrupt_cache_entry_is_a_miss`` promises). A nested-JSON value raised
    RecursionError out of the selection stage, failing the search as ESRA_INTERNAL for every
    caller asking that question."""
    cache = RedisCache(client, prefix=namespace)
    scope = _scope()
    key = selection_cache_key(
        tenant_id="tenant-a",
        exposure_id="exp-1",
        config_version="v1",
        candidate_ids=["s-opt1", "s-opt2"],
        configuration=_selection_configuration(scope),
        request=REQUEST,
    )
    await cache.set(key, _DEEP_JSON, SELECTION_TTL_S)
    model = _answer("s-opt1")

    selection = await _select(scope, model, cache=cache)  # type: ignore[arg-type]

    assert _ids(selection) == ["s-man", "s-opt1", "s-pol"]
    assert len(model.prompts) == 1
