"""RedisCache: the ``Cache`` port on Redis, shared by every runtime instance.

Performance fails open. The cache only saves work, so when Redis cannot answer within
``timeout_s`` (down, unreachable, slow, out of memory) a read answers ``None`` and a write is
dropped: the invocation runs uncached, a little slower, and never fails or waits because of
the cache. Each such failure adds one to ``esra.cache.unavailable`` (``esra.cache.operation``:
get or set) and is logged at WARNING at most once a minute.

The core builds every key (and keeps caller data out of it); this adapter only puts its
prefix in front.
"""

from __future__ import annotations

import asyncio
import logging
import math

from redis.asyncio import Redis
from redis.exceptions import RedisError

from esra.core import SystemClock
from esra.core.ports import Clock
from esra.core.telemetry import TENANT_ID, current_span_tenant, meter
from esra.redis._client import require_bytes_replies
from esra.redis._throttled_warning import DEFAULT_WARNING_INTERVAL_S, ThrottledWarning

__all__ = ["DEFAULT_CACHE_PREFIX", "DEFAULT_CACHE_TIMEOUT_S", "RedisCache"]

DEFAULT_CACHE_PREFIX = "esra:cache:"
DEFAULT_CACHE_TIMEOUT_S = 0.25
CACHE_OPERATION = "esra.cache.operation"

_logger = logging.getLogger("esra.redis")
_UNAVAILABLE = meter().create_counter(
    "esra.cache.unavailable",
    description="Cache reads and writes that Redis did not complete in time (served uncached).",
)


class RedisCache:
    """Byte values under ``prefix + key``, each with a millisecond TTL (``SET … PX``).

    Args:
        client: the host's client (see ``open_redis``); the host closes it.
        prefix: put before every key the core builds.
        timeout_s: the most one ``get`` or ``set`` waits for Redis, connecting included.
        warning_interval_s / clock: how often an outage is logged, on ``clock.monotonic``.

    Raises:
        ValueError: ``timeout_s`` not positive, or a client that decodes replies to text.
    """

    def __init__(
        self,
        client: Redis,
        *,
        prefix: str = DEFAULT_CACHE_PREFIX,
        timeout_s: float = DEFAULT_CACHE_TIMEOUT_S,
        warning_interval_s: float = DEFAULT_WARNING_INTERVAL_S,
        clock: Clock | None = None,
    ) -> None:
        require_bytes_replies(client)
        if not timeout_s > 0:
            msg = "timeout_s must be positive"
            raise ValueError(msg)
        self._client = client
        self._prefix = prefix
        self._timeout_s = timeout_s
        self._warning = ThrottledWarning(
            _logger,
            "Redis cache unavailable, serving uncached",
            interval_s=warning_interval_s,
            clock=clock or SystemClock(),
        )

    async def get(self, key: str) -> bytes | None:
        """The live value under ``key``; ``None`` if absent, expired or Redis cannot answer."""
        try:
            async with asyncio.timeout(self._timeout_s):
                value = await self._client.get(self._prefix + key)
        except (RedisError, OSError, TimeoutError) as exc:
            self._unavailable("get", exc)
            return None
        return value if isinstance(value, bytes) else None

    async def set(self, key: str, value: bytes, ttl_s: float) -> None:
        """Store ``value`` for ``ttl_s`` seconds (rounded up to whole milliseconds).

        A TTL that is not positive and finite stores nothing: every entry must expire.
        """
        if not (ttl_s > 0 and math.isfinite(ttl_s)):
            return
        try:
            async with asyncio.timeout(self._timeout_s):
                await self._client.set(self._prefix + key, value, px=math.ceil(ttl_s * 1000))
        except (RedisError, OSError, TimeoutError) as exc:
            self._unavailable("set", exc)

    def _unavailable(self, operation: str, exc: BaseException) -> None:
        _UNAVAILABLE.add(1, {CACHE_OPERATION: operation, TENANT_ID: current_span_tenant()})
        self._warning.failed(operation, exc)
