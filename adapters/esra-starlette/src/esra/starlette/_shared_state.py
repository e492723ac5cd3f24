"""``[redis]``: what several ``esra serve`` processes share through one Redis.

With ``[redis]`` configured, every host process opens one Redis client (a bounded pool) and
puts on it, each unless switched off:

- ``cache``: the selection and result caches (``esra.redis.RedisCache``; keys built by the
  core as for the in-process cache). **Fails open**: Redis unreachable, the invocation runs
  uncached and ``esra.cache.unavailable`` counts it.
- ``quota``: each caller's hourly fetch budget (``esra.redis.RedisQuotaStore``), atomic
  across hosts. **Fails closed**: Redis unreachable, a fetch is refused with
  ``ESRA_QUOTA_UNAVAILABLE``, never served unmetered.
- ``breakers``: circuit-breaker openings (``esra.redis.RedisBreakerBroadcast``): a source
  failing behind one host opens its breaker on all. Fails open.

No Redis operation waits long (the adapters' bounds, within the client's). Without
``[redis]`` each process keeps its own cache (none), quota and breakers: right for one
process, wrong for several, whose callers would each get the whole budget per process.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import attrs

from esra.core.exceptions import ConfigurationError
from esra.core.ports import BreakerBroadcast, Cache, Clock, QuotaStore

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = [
    "DEFAULT_REDIS_CONNECTIONS",
    "DEFAULT_REDIS_PREFIX",
    "RedisSettings",
    "SharedState",
    "open_shared_state",
]

DEFAULT_REDIS_PREFIX = "esra:"
DEFAULT_REDIS_CONNECTIONS = 32


@attrs.frozen
class RedisSettings:
    """``[redis]``: where the shared state lives and which parts of it are shared.

    ``url`` is the Redis URL; ``url_env`` instead names the environment variable holding it
    (read when the host starts), so a password never sits in the settings file.
    """

    url: str | None = attrs.field(default=None, repr=False)
    url_env: str | None = None
    cache: bool = True
    quota: bool = True
    breakers: bool = True
    key_prefix: str = DEFAULT_REDIS_PREFIX
    max_connections: int = DEFAULT_REDIS_CONNECTIONS

    def resolved_url(self) -> str:
        """The URL to connect to.

        Raises:
            ConfigurationError: ``url_env`` names a variable that is not set.
        """
        if self.url is not None:
            return self.url
        value = os.environ.get(self.url_env or "")
        if not value:
            msg = f"[redis] url_env: the environment variable {self.url_env} is not set"
            raise ConfigurationError(msg)
        return value


@attrs.frozen
class SharedState:
    """What a host process shares through Redis (a part switched off is ``None``)."""

    client: Redis = attrs.field(repr=False)
    cache: Cache | None
    quota: QuotaStore | None
    broadcast: BreakerBroadcast | None


@contextlib.asynccontextmanager
async def open_shared_state(settings: RedisSettings, *, clock: Clock) -> AsyncIterator[SharedState]:
    """Open the client and the shared parts; close the client on exit.

    Nothing connects until first use, so a host starts while Redis is down and serves as
    the failure rules say until it is back.

    Raises:
        ConfigurationError: esra-redis is not installed, or the URL cannot be used.
    """
    try:
        from esra.redis import (  # noqa: PLC0415 - an optional extra
            RedisBreakerBroadcast,
            RedisCache,
            RedisQuotaStore,
            open_redis,
        )
    except ImportError:
        msg = "[redis] needs esra-redis: pip install 'esra-starlette[redis]'"
        raise ConfigurationError(msg) from None
    try:
        client = open_redis(
            settings.resolved_url(),
            max_connections=settings.max_connections,
            client_name="esra-serve",
        )
    except ValueError:
        # redis-py's message may quote the URL, and with it a password.
        msg = "[redis] url: not a Redis URL redis-py can use (redis://, rediss:// or unix://)"
        raise ConfigurationError(msg) from None
    prefix = settings.key_prefix
    try:
        yield SharedState(
            client=client,
            cache=RedisCache(client, prefix=f"{prefix}cache:") if settings.cache else None,
            quota=(
                RedisQuotaStore(client, clock=clock, prefix=f"{prefix}quota:")
                if settings.quota
                else None
            ),
            broadcast=(
                RedisBreakerBroadcast(
                    client, clock=clock, prefix=f"{prefix}breaker:", channel=f"{prefix}breaker"
                )
                if settings.breakers
                else None
            ),
        )
    finally:
        await client.aclose()
