"""RedisBreakerBroadcast against a live Redis: one instance announces, another reads.

Each test has its own key prefix and channel. A reader is "listening" once Redis counts a
subscriber on its channel (``PUBSUB NUMSUB``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from redis.asyncio import Redis

from esra.core.ports import BreakerOpening
from esra.core.testing import FakeClock
from esra.redis import RedisBreakerBroadcast
from tests.redis.conftest import eventually

pytestmark = [pytest.mark.redis, pytest.mark.integration]

T0 = datetime(2026, 3, 4, 12, 0, tzinfo=UTC)


def broadcast(client: Redis, namespace: str, clock: FakeClock) -> RedisBreakerBroadcast:
    return RedisBreakerBroadcast(client, clock=clock, prefix=namespace, channel=namespace + "ch")


async def subscribers(client: Redis, channel: str) -> int:
    counts = dict(await client.pubsub_numsub(channel))
    return int(counts.get(channel.encode(), 0))


async def listening(client: Redis, namespace: str) -> None:
    async def subscribed() -> bool:
        return await subscribers(client, namespace + "ch") >= 1

    await eventually(subscribed)


async def next_opening(openings: AsyncIterator[BreakerOpening]) -> BreakerOpening:
    async with asyncio.timeout(5):
        return await anext(openings)


async def start(openings: AsyncIterator[BreakerOpening]) -> asyncio.Task[BreakerOpening]:
    """Begin reading (the first step subscribes), leaving the first opening to come."""
    return asyncio.ensure_future(next_opening(openings))


async def test_an_opening_announced_by_one_host_reaches_another(
    client: Redis, other_client: Redis, namespace: str
) -> None:
    clock = FakeClock(T0)
    reader = broadcast(client, namespace, clock)
    writer = broadcast(other_client, namespace, clock)
    async with contextlib.aclosing(reader.openings()) as openings:
        first = await start(openings)
        await listening(other_client, namespace)
        await writer.opened("acme", "crm", 30.0)

        opening = await first
        assert opening == BreakerOpening(tenant_id="acme", source_id="crm", open_for_s=30.0)


async def test_an_opening_in_force_is_read_at_start(
    client: Redis, other_client: Redis, namespace: str
) -> None:
    writer_clock = FakeClock(T0)
    await broadcast(other_client, namespace, writer_clock).opened("acme", "crm", 30.0)
    reader_clock = FakeClock(T0)
    reader_clock.advance(12)  # the reader starts 12 s after the opening

    async with contextlib.aclosing(broadcast(client, namespace, reader_clock).openings()) as it:
        opening = await next_opening(it)

    assert opening == BreakerOpening(tenant_id="acme", source_id="crm", open_for_s=18.0)
    keys = [key async for key in client.scan_iter(match=namespace + "*")]
    assert len(keys) == 1
    stored = await client.get(keys[0])
    assert isinstance(stored, bytes)
    until_ms = int(T0.timestamp()) * 1000 + 30_000
    assert json.loads(stored) == {"tenant": "acme", "source": "crm", "until_ms": until_ms}
    assert 0 < await client.pttl(keys[0]) <= 30_000


async def _read_at_start(client: Redis, namespace: str, clock: FakeClock, count: int) -> set[str]:
    seen: set[str] = set()
    async with contextlib.aclosing(broadcast(client, namespace, clock).openings()) as it:
        for _ in range(count):
            opening = await next_opening(it)
            seen.add(f"{opening.tenant_id}|{opening.source_id}|{opening.open_for_s}")
    return seen


async def test_ids_that_join_alike_keep_separate_openings(
    client: Redis, other_client: Redis, namespace: str
) -> None:
    """Tenant "acme:eu"'s source "crm" and tenant "acme"'s source "eu:crm" are two breakers:
    neither's key may replace the other's opening or its expiry."""
    clock = FakeClock(T0)
    writer = broadcast(other_client, namespace, clock)
    await writer.opened("acme:eu", "crm", 30.0)
    await writer.opened("acme", "eu:crm", 10.0)

    keys = [key async for key in client.scan_iter(match=namespace + "*")]
    assert len(keys) == 2
    shorter, longer = sorted([await client.pttl(key) for key in keys])
    assert 0 < shorter <= 10_000 < longer <= 30_000
    assert await _read_at_start(client, namespace, clock, 2) == {
        "acme:eu|crm|30.0",
        "acme|eu:crm|10.0",
    }


async def test_the_key_names_no_id(client: Redis, other_client: Redis, namespace: str) -> None:
    """Of fixed length whatever the ids (the message it holds carries them)."""
    await broadcast(other_client, namespace, FakeClock(T0)).opened("a" * 256, "b:c" * 80, 30.0)
    keys = [key async for key in client.scan_iter(match=namespace + "*")]
    assert len(keys) == 1
    assert b"aaa" not in keys[0]
    assert b"b:c" not in keys[0]
    assert len(keys[0]) == len(namespace) + 64


async def test_an_opening_kept_under_the_former_key_is_still_read(
    client: Redis, other_client: Redis, namespace: str
) -> None:
    """A host not yet upgraded keeps its openings under ``<prefix><tenant>:<source>``: they
    are read at start like any other (the message carries the ids), and expire as before."""
    message = {"tenant": "acme", "source": "crm", "until_ms": int(T0.timestamp()) * 1000 + 20_000}
    await other_client.set(namespace + "acme:crm", json.dumps(message), px=20_000)
    clock = FakeClock(T0)
    await broadcast(other_client, namespace, clock).opened("acme", "erp", 30.0)

    assert await _read_at_start(client, namespace, clock, 2) == {
        "acme|crm|20.0",
        "acme|erp|30.0",
    }


async def test_openings_already_over_are_not_yielded(
    client: Redis, other_client: Redis, namespace: str
) -> None:
    writer_clock = FakeClock(T0)
    writer = broadcast(other_client, namespace, writer_clock)
    await writer.opened("acme", "over", 30.0)  # its key still lives in Redis (real PX)
    reader_clock = FakeClock(T0)
    reader_clock.advance(60)  # ... but by the reader's clock it is over

    async with contextlib.aclosing(broadcast(client, namespace, reader_clock).openings()) as it:
        first = await start(it)
        await listening(other_client, namespace)
        await writer.opened("acme", "stale", 20.0)  # announced already over, too
        writer_clock.advance(60)
        await writer.opened("acme", "live", 30.0)

        assert (await first).source_id == "live"


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b"\xff\xfe\x00",
        b"[1, 2]",
        b'"a string"',
        b'{"tenant": "acme", "source": "crm"}',
        b'{"tenant": "acme", "source": "crm", "until_ms": "9999999999999"}',
        b'{"tenant": "acme", "source": "crm", "until_ms": true}',
        b'{"tenant": "acme", "source": "crm", "until_ms": 9.9e12}',
        b'{"tenant": "acme\\n", "source": "crm", "until_ms": 9999999999999}',
        b'{"tenant": "", "source": "crm", "until_ms": 9999999999999}',
        b'{"tenant": 7, "source": "crm", "until_ms": 9999999999999}',
        json.dumps({"tenant": "a" * 257, "source": "crm", "until_ms": 9999999999999}).encode(),
        b'{"tenant": "acme", "source": "crm", "until_ms": 1' + b"0" * 5000 + b"}",
    ],
)
async def test_malformed_announcements_and_keys_are_ignored(
    client: Redis, other_client: Redis, namespace: str, raw: bytes
) -> None:
    clock = FakeClock(T0)
    await other_client.set(namespace + "bad:key", raw, px=30_000)
    async with contextlib.aclosing(broadcast(client, namespace, clock).openings()) as it:
        first = await start(it)
        await listening(other_client, namespace)
        await other_client.publish(namespace + "ch", raw)
        await broadcast(other_client, namespace, clock).opened("acme", "good", 5.0)

        assert await first == BreakerOpening(tenant_id="acme", source_id="good", open_for_s=5.0)


async def test_an_opening_with_ids_no_reader_accepts_is_not_announced(
    client: Redis, namespace: str
) -> None:
    writer = broadcast(client, namespace, FakeClock(T0))
    await writer.opened("acme\n", "crm", 30.0)
    await writer.opened("acme", "x" * 300, 30.0)
    await writer.opened("acme", "crm", 0.0)
    await writer.opened("acme", "crm", float("nan"))

    assert [key async for key in client.scan_iter(match=namespace + "*")] == []


async def test_closing_the_iterator_closes_its_subscription(
    client: Redis, other_client: Redis, namespace: str
) -> None:
    clock = FakeClock(T0)
    await broadcast(other_client, namespace, clock).opened("acme", "crm", 30.0)
    openings = broadcast(client, namespace, clock).openings()
    assert (await next_opening(openings)).source_id == "crm"  # now waiting at its yield
    assert await subscribers(other_client, namespace + "ch") == 1

    await openings.aclose()

    async def unsubscribed() -> bool:
        return await subscribers(other_client, namespace + "ch") == 0

    await eventually(unsubscribed, within_s=1.0)


async def test_cancelling_a_read_closes_its_subscription(
    client: Redis, other_client: Redis, namespace: str
) -> None:
    openings = broadcast(client, namespace, FakeClock(T0)).openings()
    first = await start(openings)
    await listening(other_client, namespace)
    first.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await first

    async def unsubscribed() -> bool:
        return await subscribers(other_client, namespace + "ch") == 0

    await eventually(unsubscribed)


async def test_breaking_out_of_async_for_closes_its_subscription(
    client: Redis, other_client: Redis, namespace: str
) -> None:
    clock = FakeClock(T0)
    await broadcast(other_client, namespace, clock).opened("acme", "crm", 30.0)

    async def read_one() -> BreakerOpening:
        async for opening in broadcast(client, namespace, clock).openings():
            return opening
        raise AssertionError("openings() ended")

    async with asyncio.timeout(5):
        assert (await read_one()).source_id == "crm"

    async def unsubscribed() -> bool:
        return await subscribers(other_client, namespace + "ch") == 0

    # The dropped generator is closed by the event loop's finaliser, soon after.
    await eventually(unsubscribed)


def test_bounds_must_be_positive(client: Redis) -> None:
    with pytest.raises(ValueError, match="positive"):
        RedisBreakerBroadcast(client, keepalive_s=0)
