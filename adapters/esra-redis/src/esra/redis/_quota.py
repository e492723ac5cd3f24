"""RedisQuotaStore: the ``QuotaStore`` port shared by every runtime instance, on Redis.

One counter per (tenant, caller, UTC hour). A consumption is one Lua script, which Redis runs
alone — nothing else touches the counter between its read and its write — so fetches on any
number of instances can never together spend more than a caller's budget::

    used = GET counter (0 when absent)
    if used is not a whole number >= 0: error      -- fails closed, see below
    if used + amount > limit: return refused        -- nothing consumed
    INCRBY counter amount
    PEXPIRE counter <until the end of the hour, plus a margin>
    return granted

Governance fails closed: when Redis cannot answer within ``timeout_s`` the store raises
``QuotaUnavailableError`` and the fetch is refused; it never grants unmetered. A script that
ran but whose reply was lost (a timeout, a dropped connection) has consumed the amount: the
caller loses that much of the hour's budget and is told to retry, which errs only towards
refusing. ESRA writes nothing but such counters under its prefix, so a counter that is not
a whole number of at least zero was written by someone else (a negative one would grant that
much more than the budget): it fails closed like an outage, until it expires or is deleted.

The hour comes from the injected ``Clock``, as for ``InProcessQuotaStore``, so every instance
(with clocks in step) counts into the same key and a fake clock moves it in tests. The
caller is not stored in clear: the key holds a SHA-256 digest of tenant and caller (an
HMAC-SHA-256 one when a ``digest_key`` is given, so that the digest of a known caller id
cannot be computed by whoever can read Redis).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import math
from datetime import UTC, datetime, timedelta

from redis.asyncio import Redis
from redis.exceptions import RedisError

from esra.core import SystemClock
from esra.core.exceptions import QuotaUnavailableError
from esra.core.ports import Clock
from esra.redis._client import require_bytes_replies
from esra.redis._throttled_warning import DEFAULT_WARNING_INTERVAL_S, ThrottledWarning

__all__ = [
    "DEFAULT_QUOTA_EXPIRY_MARGIN_S",
    "DEFAULT_QUOTA_PREFIX",
    "DEFAULT_QUOTA_TIMEOUT_S",
    "RedisQuotaStore",
]

DEFAULT_QUOTA_PREFIX = "esra:quota:"
DEFAULT_QUOTA_TIMEOUT_S = 0.5
# An instance whose clock lags still counts into the hour just ended; its counter must outlive
# the hour by more than any skew between instances' clocks.
DEFAULT_QUOTA_EXPIRY_MARGIN_S = 300.0

_logger = logging.getLogger("esra.redis")
_CONSUME = """
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
if used == nil or used < 0 or used ~= math.floor(used) then
  return redis.error_reply('ESRA quota counter holds no count')
end
local amount = tonumber(ARGV[1])
if used + amount > tonumber(ARGV[2]) then
  return 0
end
redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""


class RedisQuotaStore:
    """Hourly per-caller character budgets in counters ``<prefix><tenant>:<hour>:<digest>``.

    Args:
        client: the host's client (see ``open_redis``); the host closes it.
        clock: time source for the current hour (the system clock by default).
        prefix: put before every counter key.
        digest_key: if given, callers are digested with HMAC-SHA-256 under this key (every
            instance must use the same one); otherwise with plain SHA-256.
        timeout_s: the most one ``consume`` waits for Redis, connecting included.
        expiry_margin_s: how long a counter outlives its hour.
        warning_interval_s: how often an outage is logged, on ``clock.monotonic``.

    Raises:
        ValueError: a timeout or margin that is not positive, or a client that decodes
            replies to text.
    """

    def __init__(
        self,
        client: Redis,
        *,
        clock: Clock | None = None,
        prefix: str = DEFAULT_QUOTA_PREFIX,
        digest_key: bytes | None = None,
        timeout_s: float = DEFAULT_QUOTA_TIMEOUT_S,
        expiry_margin_s: float = DEFAULT_QUOTA_EXPIRY_MARGIN_S,
        warning_interval_s: float = DEFAULT_WARNING_INTERVAL_S,
    ) -> None:
        require_bytes_replies(client)
        if not (timeout_s > 0 and expiry_margin_s > 0):
            msg = "timeout_s and expiry_margin_s must be positive"
            raise ValueError(msg)
        self._clock = clock or SystemClock()
        self._prefix = prefix
        self._digest_key = digest_key
        self._timeout_s = timeout_s
        self._margin = timedelta(seconds=expiry_margin_s)
        self._script = client.register_script(_CONSUME)
        self._warning = ThrottledWarning(
            _logger,
            "Redis quota store unavailable, refusing fetches",
            interval_s=warning_interval_s,
            clock=self._clock,
        )

    async def consume(self, tenant_id: str, caller: str, amount: int, limit: int) -> bool:
        """Consume ``amount`` if it fits within ``limit`` this hour; return whether it did.

        A negative ``amount`` is refused rather than credited back; an ``amount`` over the
        ``limit`` is refused without asking Redis.

        Raises:
            QuotaUnavailableError: Redis did not answer within the timeout, or failed.
        """
        if amount < 0 or amount > limit:
            return False
        now = self._clock.now().astimezone(UTC)
        hour_start = now.replace(minute=0, second=0, microsecond=0)
        # "surrogatepass": a tenant id is any text, as for InProcessQuotaStore, and a lone
        # surrogate has no strict UTF-8 encoding (redis-py's would raise UnicodeEncodeError).
        key = self.counter_key(tenant_id, caller, hour_start).encode("utf-8", "surrogatepass")
        keep_ms = _milliseconds(hour_start + timedelta(hours=1) + self._margin - now)
        try:
            async with asyncio.timeout(self._timeout_s):
                granted = await self._script(keys=[key], args=[amount, limit, keep_ms])
        except (RedisError, OSError, TimeoutError) as exc:
            self._warning.failed("consume", exc)
            raise QuotaUnavailableError from exc
        return bool(granted == 1)

    def counter_key(self, tenant_id: str, caller: str, hour: datetime) -> str:
        """The key of the counter of (``tenant_id``, ``caller``) in the UTC hour ``hour``."""
        return f"{self._prefix}{tenant_id}:{hour:%Y%m%d%H}:{self.caller_digest(tenant_id, caller)}"

    def caller_digest(self, tenant_id: str, caller: str) -> str:
        """The hex digest that stands for (``tenant_id``, ``caller``) in counter keys.

        The tenant is length-prefixed, so no two pairs share an input.
        """
        message = f"{len(tenant_id)}:{tenant_id}{caller}".encode(errors="surrogatepass")
        if self._digest_key is None:
            return hashlib.sha256(message).hexdigest()
        return hmac.new(self._digest_key, message, hashlib.sha256).hexdigest()


def _milliseconds(span: timedelta) -> int:
    return max(1, math.ceil(span / timedelta(milliseconds=1)))
