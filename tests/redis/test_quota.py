"""RedisQuotaStore against a live Redis: InProcessQuotaStore's semantics, shared by instances.

Two stores on two separate clients stand for two hosts: racing consumptions on both never
grant more than the budget, and grant exactly as much of it as fits.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from redis.asyncio import Redis

from esra.core._quota import InProcessQuotaStore
from esra.core.testing import FakeClock
from esra.redis import RedisQuotaStore, open_redis

pytestmark = [pytest.mark.redis, pytest.mark.integration]

NOON = datetime(2026, 3, 4, 12, 0, tzinfo=UTC)


# The races test atomicity, not the fail-closed bound (tests/redis/test_failures.py does):
# hundreds of calls queue for a pool's connections at once, and on a loaded machine the last
# of them would outwait the default half second (or the pool's one second) and be refused,
# which is not a grant. So the racing hosts wait as long as it takes, at every step.
RACE_TIMEOUT_S = 30.0


@pytest.fixture
async def racing_clients(redis_url: str) -> AsyncIterator[tuple[Redis, Redis]]:
    """Two separate clients (two hosts) that wait for their pools, connections and sockets
    patiently: on a loaded machine, opening a pool's worth of connections at once can take
    longer than the production connect bound (test_failures.py tests the bounds)."""
    first, second = (
        open_redis(
            redis_url,
            pool_timeout_s=RACE_TIMEOUT_S,
            socket_timeout_s=RACE_TIMEOUT_S,
            connect_timeout_s=RACE_TIMEOUT_S,
        )
        for _ in range(2)
    )
    yield first, second
    await first.aclose()
    await second.aclose()


async def counted(client: Redis, key: str) -> int:
    """What the counter under ``key`` holds."""
    raw = await client.get(key)
    assert isinstance(raw, bytes)
    return int(raw)


async def test_consumption_follows_the_in_process_store(client: Redis, namespace: str) -> None:
    clock = FakeClock(NOON)
    redis_store = RedisQuotaStore(client, clock=clock, prefix=namespace)
    reference = InProcessQuotaStore(clock)
    steps = [
        ("acme", "alice", 400, 1000),
        ("acme", "alice", 700, 1000),  # over what is left: refused, nothing consumed
        ("acme", "alice", 600, 1000),  # exactly what is left
        ("acme", "alice", 1, 1000),
        ("acme", "alice", 0, 1000),
        ("acme", "alice", -50, 1000),  # never credited back
        ("acme", "bob", 1000, 1000),  # another caller has a budget of its own
        ("globex", "alice", 5, 1000),  # so does the same caller in another tenant
        ("acme", "carol", 1001, 1000),  # more than the whole budget
        ("acme", "dave", 3, 0),
    ]
    for tenant, caller, amount, limit in steps:
        expected = await reference.consume(tenant, caller, amount, limit)
        assert await redis_store.consume(tenant, caller, amount, limit) is expected, (
            tenant,
            caller,
            amount,
        )


async def test_two_hosts_racing_grant_the_budget_exactly_once(
    racing_clients: tuple[Redis, Redis], namespace: str
) -> None:
    client, other_client = racing_clients
    clock = FakeClock(NOON)
    hosts = [
        RedisQuotaStore(client, clock=clock, prefix=namespace, timeout_s=RACE_TIMEOUT_S),
        RedisQuotaStore(other_client, clock=clock, prefix=namespace, timeout_s=RACE_TIMEOUT_S),
    ]
    limit, amount, attempts = 1000, 7, 300

    async def attempt(i: int) -> bool:
        return await hosts[i % 2].consume("acme", "alice", amount, limit)

    granted = await asyncio.gather(*(attempt(i) for i in range(attempts)))

    assert sum(granted) == limit // amount  # 142: all that fits, and no more
    key = hosts[0].counter_key("acme", "alice", NOON)
    assert await counted(client, key) == (limit // amount) * amount


async def test_racing_amounts_of_every_size_never_exceed_the_budget(
    racing_clients: tuple[Redis, Redis], namespace: str
) -> None:
    client, other_client = racing_clients
    clock = FakeClock(NOON)
    hosts = [
        RedisQuotaStore(client, clock=clock, prefix=namespace, timeout_s=RACE_TIMEOUT_S),
        RedisQuotaStore(other_client, clock=clock, prefix=namespace, timeout_s=RACE_TIMEOUT_S),
    ]
    amounts = [random.Random(17).randint(1, 120) for _ in range(200)]
    limit = 2500

    async def attempt(i: int) -> bool:
        return await hosts[i % 2].consume("acme", "alice", amounts[i], limit)

    granted = await asyncio.gather(*(attempt(i) for i in range(len(amounts))))
    spent = sum(a for a, ok in zip(amounts, granted, strict=True) if ok)

    assert spent <= limit
    assert await counted(client, hosts[0].counter_key("acme", "alice", NOON)) == spent
    # Every refusal was one that did not fit at the time: with all grants in, the smallest
    # refused amount would not fit now either.
    refused = [a for a, ok in zip(amounts, granted, strict=True) if not ok]
    assert all(spent + a > limit for a in refused)


async def test_a_new_hour_starts_a_new_budget(client: Redis, namespace: str) -> None:
    clock = FakeClock(datetime(2026, 3, 4, 12, 59, 59, tzinfo=UTC))
    store = RedisQuotaStore(client, clock=clock, prefix=namespace, expiry_margin_s=300)

    assert await store.consume("acme", "alice", 100, 100)
    assert not await store.consume("acme", "alice", 1, 100)

    clock.advance(1)  # 13:00:00
    assert await store.consume("acme", "alice", 100, 100)
    assert not await store.consume("acme", "alice", 1, 100)

    # The spent hour's counter outlives its hour by the margin, no longer: it was set with
    # one second of the hour left, plus 300 s.
    old = store.counter_key("acme", "alice", datetime(2026, 3, 4, 12, tzinfo=UTC))
    assert 0 < await client.pttl(old) <= 301_000
    new = store.counter_key("acme", "alice", datetime(2026, 3, 4, 13, tzinfo=UTC))
    assert 3_600_000 < await client.pttl(new) <= 3_900_000


async def test_the_caller_is_not_in_the_keys(client: Redis, namespace: str) -> None:
    clock = FakeClock(NOON)
    plain = RedisQuotaStore(client, clock=clock, prefix=namespace)
    keyed = RedisQuotaStore(client, clock=clock, prefix=namespace, digest_key=b"k" * 32)
    caller = "alice@example.com"

    assert await plain.consume("acme", caller, 5, 100)
    assert await keyed.consume("acme", caller, 5, 100)
    assert await plain.consume("globex", caller, 5, 100)

    keys = sorted([k.decode() async for k in client.scan_iter(match=namespace + "*")])
    assert len(keys) == 3  # per tenant, and the keyed digest differs from the plain one
    assert not any(caller in key or "alice" in key for key in keys)
    digest = hashlib.sha256(f"4:acme{caller}".encode()).hexdigest()
    assert f"{namespace}acme:2026030412:{digest}" in keys
    assert plain.caller_digest("acme", caller) != keyed.caller_digest("acme", caller)


async def test_a_tenant_and_caller_split_differently_are_different_callers(
    client: Redis, namespace: str
) -> None:
    store = RedisQuotaStore(client, clock=FakeClock(NOON), prefix=namespace)

    assert store.caller_digest("ab", "c") != store.caller_digest("a", "bc")
    assert await store.consume("ab", "c", 10, 10)
    assert await store.consume("a", "bc", 10, 10)


def test_bounds_must_be_positive(client: Redis) -> None:
    with pytest.raises(ValueError, match="positive"):
        RedisQuotaStore(client, timeout_s=0)
    with pytest.raises(ValueError, match="positive"):
        RedisQuotaStore(client, expiry_margin_s=-1)
