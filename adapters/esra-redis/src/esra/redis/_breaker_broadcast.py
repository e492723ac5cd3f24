"""RedisBreakerBroadcast: the ``BreakerBroadcast`` port on Redis keys and one pub/sub channel.

An opening is written twice, in one round trip::

    SET     <prefix><digest>  {"tenant": …, "source": …, "until_ms": …}  PX <open for>
    PUBLISH <channel>         {"tenant": …, "source": …, "until_ms": …}

``until_ms`` is the wall-clock epoch millisecond (the injected ``Clock``) until which the
breaker stays open. The key lets an instance that starts, or reconnects, learn the openings
still in force; the message tells the instances listening now. ``<digest>`` is the SHA-256
(hex) of the JSON array ``[tenant, source]``: one key per pair, whatever the ids hold (joined
with a separator, tenant "acme:eu"'s source "crm" and tenant "acme"'s source "eu:crm" would
share a key, and the later opening would replace the other's, expiry included). The key holds
the whole message, so reading it back never depends on the key's name: openings a host of an
earlier version keeps under ``<prefix><tenant>:<source>`` are read the same way, and expire
with their openings.

``openings()`` subscribes first and reads the keys as soon as Redis confirms the subscription,
so an opening announced in between is seen in one or the other (or both, which is harmless:
opening a breaker again for what is left changes nothing). It then yields each announcement.
Malformed messages, ids that are not short printable strings and openings already over are
skipped. When the connection is lost — an error, or silence after a PING — it reconnects with
a jittered exponential backoff and reads the keys again; it ends only when it is closed.

Sharing is a resilience aid, so it fails open: ``opened`` never raises, and a lost or
undelivered broadcast leaves the other instances to find the failures themselves. Each
failure adds one to ``esra.breaker.broadcast.failures`` (``esra.breaker.operation``: opened,
or openings for a lost subscription) and is logged at WARNING at most once a minute.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import random
from collections.abc import AsyncGenerator
from typing import Any, TypeGuard

from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.exceptions import RedisError

from esra.core import SystemClock
from esra.core.ports import BreakerOpening, Clock
from esra.core.telemetry import TENANT_ID, meter
from esra.redis._client import require_bytes_replies
from esra.redis._throttled_warning import DEFAULT_WARNING_INTERVAL_S, ThrottledWarning

__all__ = [
    "DEFAULT_BREAKER_CHANNEL",
    "DEFAULT_BREAKER_PREFIX",
    "DEFAULT_BREAKER_TIMEOUT_S",
    "DEFAULT_KEEPALIVE_S",
    "DEFAULT_RECONNECT_INITIAL_S",
    "DEFAULT_RECONNECT_MAX_S",
    "MAX_ID_LENGTH",
    "RedisBreakerBroadcast",
]

DEFAULT_BREAKER_PREFIX = "esra:breaker:"
DEFAULT_BREAKER_CHANNEL = "esra:breaker"
DEFAULT_BREAKER_TIMEOUT_S = 0.5
DEFAULT_RECONNECT_INITIAL_S = 0.1
DEFAULT_RECONNECT_MAX_S = 5.0
DEFAULT_KEEPALIVE_S = 5.0
MAX_ID_LENGTH = 256
BREAKER_OPERATION = "esra.breaker.operation"

# Far more than any well-formed message (two ids of MAX_ID_LENGTH, JSON-escaped, and a number).
_MAX_MESSAGE_BYTES = 4 * 6 * MAX_ID_LENGTH
# Longer than any opening a host announces (a breaker's reset is seconds to minutes): a
# value past it is malformed, and a far larger one would not even divide into a float.
_MAX_OPEN_MS = 24 * 3600 * 1000
_SCAN_COUNT = 200
_logger = logging.getLogger("esra.redis")
_FAILURES = meter().create_counter(
    "esra.breaker.broadcast.failures",
    description="Breaker openings not announced, and breaker subscriptions lost, on Redis.",
)


class _ConnectionSilentError(TimeoutError):
    """Redis answered neither a message nor a PING for two keepalive intervals."""


class RedisBreakerBroadcast:
    """Announces breaker openings to every instance, and reads the ones announced.

    Args:
        client: the host's client (see ``open_redis``); the host closes it. Each running
            ``openings()`` iteration holds one of its pooled connections.
        clock: wall-clock time for ``until_ms`` (the system clock by default).
        prefix / channel: where openings are kept and announced.
        timeout_s: the most one round trip waits for Redis, connecting included.
        keepalive_s: after this long without a message the subscription is PINGed; with no
            reply after as long again, it is taken for lost.
        reconnect_initial_s / reconnect_max_s: the backoff between reconnection attempts.
        warning_interval_s: how often a failure is logged, on ``clock.monotonic``.

    Raises:
        ValueError: a bound that is not positive, or a client that decodes replies to text.
    """

    def __init__(
        self,
        client: Redis,
        *,
        clock: Clock | None = None,
        prefix: str = DEFAULT_BREAKER_PREFIX,
        channel: str = DEFAULT_BREAKER_CHANNEL,
        timeout_s: float = DEFAULT_BREAKER_TIMEOUT_S,
        keepalive_s: float = DEFAULT_KEEPALIVE_S,
        reconnect_initial_s: float = DEFAULT_RECONNECT_INITIAL_S,
        reconnect_max_s: float = DEFAULT_RECONNECT_MAX_S,
        warning_interval_s: float = DEFAULT_WARNING_INTERVAL_S,
    ) -> None:
        require_bytes_replies(client)
        if not all(
            bound > 0 for bound in (timeout_s, keepalive_s, reconnect_initial_s, reconnect_max_s)
        ):
            msg = "timeouts, keepalive and reconnection delays must be positive"
            raise ValueError(msg)
        self._client = client
        self._clock = clock or SystemClock()
        self._prefix = prefix
        self._channel = channel
        self._timeout_s = timeout_s
        self._keepalive_s = keepalive_s
        self._reconnect_initial_s = reconnect_initial_s
        self._reconnect_max_s = max(reconnect_max_s, reconnect_initial_s)
        self._warning = ThrottledWarning(
            _logger,
            "Redis breaker broadcast unavailable",
            interval_s=warning_interval_s,
            clock=self._clock,
        )

    async def opened(self, tenant_id: str, source_id: str, open_for_s: float) -> None:
        """Keep and announce that ``source_id``'s breaker is open for ``open_for_s`` seconds.

        Never raises. An opening with a non-positive duration, or with ids no instance would
        accept (see ``MAX_ID_LENGTH``), is not announced.
        """
        if not (_is_short_printable(tenant_id) and _is_short_printable(source_id)):
            _logger.warning("breaker opening not announced: ids are not short printable text")
            return
        if not (open_for_s > 0 and math.isfinite(open_for_s)):
            return
        open_for_ms = math.ceil(open_for_s * 1000)
        message = json.dumps(
            {"tenant": tenant_id, "source": source_id, "until_ms": self._now_ms() + open_for_ms},
            separators=(",", ":"),
        )
        try:
            async with asyncio.timeout(self._timeout_s):
                async with self._client.pipeline(transaction=False) as pipe:
                    pipe.set(self._key(tenant_id, source_id), message, px=open_for_ms)
                    pipe.publish(self._channel, message)
                    await pipe.execute()
        except (RedisError, OSError, TimeoutError) as exc:
            self._failed("opened", exc, tenant_id)

    async def openings(self) -> AsyncGenerator[BreakerOpening, None]:
        """The openings in force, then each announced one; reconnects until closed.

        Closing the iteration (``aclose()``, or leaving an ``async for`` over
        ``contextlib.aclosing(...)``) closes its pub/sub connection at once; an iteration
        merely dropped is closed when the event loop finalises it.
        """
        delay = self._reconnect_initial_s
        while True:
            pubsub = self._client.pubsub()
            try:
                async with asyncio.timeout(self._timeout_s):
                    await pubsub.subscribe(self._channel)
                ping_pending = False
                while True:
                    message = await self._next_message(pubsub)
                    if message is None:
                        if ping_pending:
                            raise _ConnectionSilentError
                        async with asyncio.timeout(self._timeout_s):
                            await pubsub.ping()
                        ping_pending = True
                        continue
                    ping_pending = False
                    if message.get("type") == "subscribe":
                        delay = self._reconnect_initial_s
                    for opening in await self._openings_in(message):
                        yield opening
            except (RedisError, OSError, TimeoutError) as exc:
                self._failed("openings", exc, "")
            finally:
                # redis 8.1 leaves PubSub.aclose unannotated, 8.2 annotates it: both are supported.
                await pubsub.aclose()  # type: ignore[no-untyped-call, unused-ignore]
            await asyncio.sleep(delay * random.uniform(0.5, 1.0))
            delay = min(delay * 2, self._reconnect_max_s)

    async def _next_message(self, pubsub: PubSub) -> dict[str, Any] | None:
        # get_message returns None once keepalive_s passes quietly; the outer bound covers
        # the reconnection redis-py may attempt first.
        async with asyncio.timeout(self._keepalive_s + self._timeout_s):
            message = await pubsub.get_message(timeout=self._keepalive_s)
        return message if isinstance(message, dict) else None

    async def _openings_in(self, message: dict[str, Any]) -> list[BreakerOpening]:
        kind = message.get("type")
        if kind == "subscribe":
            # Subscribed (again, after a reconnection inside redis-py too): what was announced
            # while not subscribed is in the keys.
            return await self._in_force()
        if kind == "message":
            announced = self._decode(message.get("data"))
            return [] if announced is None else [announced]
        return []  # a PING's reply

    async def _in_force(self) -> list[BreakerOpening]:
        pattern = _glob_escape(self._prefix) + "*"
        found: list[BreakerOpening] = []
        cursor = 0
        while True:
            async with asyncio.timeout(self._timeout_s):
                cursor, keys = await self._client.scan(cursor, match=pattern, count=_SCAN_COUNT)
                values = await self._client.mget(keys) if keys else []
            found.extend(o for o in map(self._decode, values) if o is not None)
            if cursor == 0:
                return found

    def _decode(self, raw: object) -> BreakerOpening | None:
        """The opening ``raw`` announces, if well formed and not yet over."""
        if not isinstance(raw, bytes) or len(raw) > _MAX_MESSAGE_BYTES:
            return None
        try:
            fields = json.loads(raw)
        except (ValueError, RecursionError):  # "[[[…" within the size bound nests too deep
            return None
        if not isinstance(fields, dict):
            return None
        tenant, source, until_ms = (
            fields.get("tenant"),
            fields.get("source"),
            fields.get("until_ms"),
        )
        if not (_is_short_printable(tenant) and _is_short_printable(source)):
            return None
        if not isinstance(until_ms, int) or isinstance(until_ms, bool):
            return None
        left_ms = until_ms - self._now_ms()
        if not 0 < left_ms <= _MAX_OPEN_MS:  # over, or no opening ESRA announces (nor a float)
            return None
        return BreakerOpening(tenant_id=tenant, source_id=source, open_for_s=left_ms / 1000)

    def _key(self, tenant_id: str, source_id: str) -> str:
        """The opening's key: unambiguous for any ids, and of fixed length."""
        pair = json.dumps([tenant_id, source_id], ensure_ascii=True, separators=(",", ":"))
        return self._prefix + hashlib.sha256(pair.encode()).hexdigest()

    def _now_ms(self) -> int:
        return math.floor(self._clock.now().timestamp() * 1000)

    def _failed(self, operation: str, exc: BaseException, tenant_id: str) -> None:
        _FAILURES.add(1, {BREAKER_OPERATION: operation, TENANT_ID: tenant_id})
        self._warning.failed(operation, exc)


def _is_short_printable(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and 0 < len(value) <= MAX_ID_LENGTH and value.isprintable()


def _glob_escape(text: str) -> str:
    """``text`` as a literal in a Redis MATCH pattern."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)
