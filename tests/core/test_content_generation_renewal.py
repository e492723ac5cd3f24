"""A content-generation renewal is read back: a write the cache dropped is written again.

The ``Cache`` port fails open, so a dropped write used to pass for a renewal, and every host
went on reading the old generation (serving responses that may show a deleted document).
"""

from __future__ import annotations

import logging

import pytest

from esra.core._pipeline import content_generation as generation
from esra.core._pipeline.content_generation import content_generation, renew_content_generation
from esra.core.testing import InMemoryCache


class DroppingCache(InMemoryCache):
    """Drops its first ``drops`` writes without a word, as a fail-open cache does."""

    def __init__(self, drops: int) -> None:
        super().__init__()
        self.drops = drops
        self.writes = 0

    async def set(self, key: str, value: bytes, ttl_s: float) -> None:
        self.writes += 1
        if self.drops > 0:
            self.drops -= 1
            return
        await super().set(key, value, ttl_s)


@pytest.fixture(autouse=True)
def _no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(generation, "_RENEWAL_FIRST_WAIT_S", 0.0)


async def test_a_dropped_write_is_written_again_until_the_cache_holds_it() -> None:
    cache = DroppingCache(drops=0)
    before = await content_generation(cache, "acme")
    cache.drops = 2
    assert await renew_content_generation(cache, "acme")
    assert cache.writes == 1 + 3
    assert await content_generation(cache, "acme") != before


async def test_a_renewal_the_cache_never_takes_is_reported_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cache = DroppingCache(drops=0)
    await content_generation(cache, "acme")
    cache.drops = 100
    with caplog.at_level(logging.ERROR):
        assert not await renew_content_generation(cache, "acme")
    assert cache.writes == 1 + generation._RENEWAL_ATTEMPTS
    assert any("tenant acme not renewed" in r.getMessage() for r in caplog.records)


async def test_a_cache_that_raises_is_a_renewal_not_confirmed() -> None:
    class Broken(InMemoryCache):
        async def set(self, key: str, value: bytes, ttl_s: float) -> None:
            raise ConnectionError

    assert not await renew_content_generation(Broken(), "acme")
