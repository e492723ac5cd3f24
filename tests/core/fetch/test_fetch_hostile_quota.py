"""Hostile fetches against the budget and the audit trail.

- a caller whose hourly budget is spent made every fetch read the whole record from its
  source before being refused;
- ``InProcessQuotaStore`` took a NaN or a float as a number (a NaN amount poisoned the
  caller's count for the hour, granting everything after it) and forgot every caller's
  spending when the clock stepped back across an hour boundary;
- an offset too long for JSON's integer conversion made the durable audit codec raise
  after the page was served.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from esra.core._audit.codec import dimensions_json
from esra.core._audit.record import AuditRecord
from esra.core._quota import InProcessQuotaStore
from esra.core.exceptions import FetchQuotaExceededError, InvalidRequestError
from esra.core.testing import FakeClock
from tests.core.fetch.test_fetch_service import _caller, _World

# --- an exhausted caller costs the source nothing --------------------------------------------


async def test_an_exhausted_caller_is_refused_before_the_source_is_read() -> None:
    world = _World(hourly_chars=200)
    ref = await world.ref_for("Annual leave policy", _caller())
    await world.fetcher.fetch(_caller(), ref, max_chars=200 - 39)  # the whole budget
    reads = len(world.provider.executed)

    for _ in range(3):
        with pytest.raises(FetchQuotaExceededError):
            await world.fetcher.fetch(_caller(), ref, offset=161, max_chars=100)

    assert len(world.provider.executed) == reads
    assert [r.outcome for r in world.fetches()] == ["ok", "denied", "denied", "denied"]
    assert all(r.reason == "ESRA_FETCH_QUOTA_EXCEEDED" for r in world.fetches()[1:])


async def test_the_pre_check_spends_nothing_and_serves_the_budget_to_its_last_character() -> None:
    world = _World(hourly_chars=200)
    ref = await world.ref_for("Annual leave policy", _caller())
    await world.fetcher.fetch(_caller(), ref, max_chars=100)  # 100 + 39 of 200

    last = await world.fetcher.fetch(_caller(), ref, offset=100, max_chars=61 - 39)
    with pytest.raises(FetchQuotaExceededError):
        await world.fetcher.fetch(_caller(), ref, offset=122, max_chars=1)

    assert len(last.text) == 22


async def test_an_exhausted_caller_learns_nothing_about_the_record() -> None:
    """Refused before the read, a spent budget reads the same for a record since deleted."""
    world = _World(hourly_chars=200)
    ref = await world.ref_for("Annual leave policy", _caller())
    await world.fetcher.fetch(_caller(), ref, max_chars=200 - 39)
    world.provider._rows["m-s-1"].pop(0)

    with pytest.raises(FetchQuotaExceededError):
        await world.fetcher.fetch(_caller(), ref)


# --- InProcessQuotaStore ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("amount", "limit"),
    [
        (math.nan, 100),
        (1.5, 100),
        (True, 100),
        ("5", 100),
        (5, math.nan),
        (5, math.inf),
        (5, 100.0),
        (5, -1),
    ],
    ids=["nan", "fraction", "bool", "str", "nan-limit", "inf-limit", "float-limit", "neg-limit"],
)
async def test_a_non_integer_amount_or_limit_is_refused_and_spends_nothing(
    amount: Any, limit: Any
) -> None:
    store = InProcessQuotaStore(FakeClock())
    assert not await store.consume("t", "c", amount, limit)
    # The caller's count is untouched: exactly the budget is still there, and no more.
    assert await store.consume("t", "c", 100, 100)
    assert not await store.consume("t", "c", 1, 100)


async def test_a_zero_amount_only_asks_and_a_huge_one_is_refused() -> None:
    store = InProcessQuotaStore(FakeClock())
    assert await store.consume("t", "c", 0, 10)
    assert not await store.consume("t", "c", 10**100, 10)
    assert await store.consume("t", "c", 10, 10)
    assert await store.consume("t", "c", 0, 10)
    assert not await store.consume("t", "c", 0, 9)  # nothing left: the pre-check's question


async def test_the_clock_stepping_back_across_the_hour_grants_no_second_budget() -> None:
    clock = FakeClock(datetime(2026, 1, 1, 11, 0, 0, tzinfo=UTC))
    store = InProcessQuotaStore(clock)
    assert await store.consume("t", "c", 100, 100)
    clock.advance(-1)  # 10:59:59 — an NTP step back
    assert not await store.consume("t", "c", 1, 100)
    clock.advance(1)
    assert not await store.consume("t", "c", 1, 100)
    clock.advance(3600)
    assert await store.consume("t", "c", 100, 100)


async def test_the_hour_is_the_utc_hour_whatever_the_clocks_zone() -> None:
    """11:40 UTC read as 17:10 at UTC+05:30: the hour still ends at 12:00 UTC, not 12:30."""
    zone = timezone(timedelta(hours=5, minutes=30))
    clock = FakeClock(datetime(2026, 1, 1, 11, 40, tzinfo=UTC).astimezone(zone))
    store = InProcessQuotaStore(clock)
    assert await store.consume("t", "c", 100, 100)
    clock.advance(25 * 60)  # 12:05 UTC, 17:35 local: a new UTC hour, the same local one
    assert await store.consume("t", "c", 100, 100)


async def test_callers_of_different_tenants_never_share_a_count() -> None:
    store = InProcessQuotaStore(FakeClock())
    assert await store.consume("a", "b:c", 100, 100)
    assert await store.consume("a:b", "c", 100, 100)
    assert await store.consume("b", "b:c", 100, 100)


# --- the audit record survives any integer offset ---------------------------------------------


class _SerializingAuditSink:
    """Encodes every record as every durable sink does (``dimensions_json``) before keeping it."""

    def __init__(self) -> None:
        self.records: list[AuditRecord] = []

    async def record(self, record: AuditRecord) -> None:
        dimensions_json(record)
        self.records.append(record)


@pytest.mark.parametrize("offset", [10**5000, -(10**5000)], ids=["huge", "huge-negative"])
async def test_an_offset_too_long_for_json_is_still_audited(offset: int) -> None:
    world = _World()
    ref = await world.ref_for("Annual leave policy", _caller())
    sink = _SerializingAuditSink()
    world.fetcher._audit = sink

    if offset < 0:
        with pytest.raises(InvalidRequestError):
            await world.fetcher.fetch(_caller(), ref, offset=offset)
    else:
        page = await world.fetcher.fetch(_caller(), ref, offset=offset)
        assert (page.text, page.has_more) == ("", False)

    (fetch,) = [r for r in sink.records if r.event.value == "esra.fetch"]
    assert fetch.dimensions["offset"] is None
