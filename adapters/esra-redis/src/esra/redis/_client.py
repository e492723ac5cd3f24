"""The Redis client a host opens once and hands to every adapter here, and its readiness ping.

Every bound is explicit, so no call waits on Redis for long: a connection attempt gives up
after ``connect_timeout_s``, a reply after ``socket_timeout_s``, and a caller waiting for a free
pooled connection after ``pool_timeout_s`` (the pool never grows past ``max_connections``).
The adapters bound each of their operations more tightly still; these are the backstop.

A failed command is retried ``retries`` times (default once) and only on a connection error,
never on a timeout: a timed-out command may have run on the server, and running the quota
script twice would count a fetch twice. A retry after a connection error can still, rarely,
repeat a script whose reply was lost with the connection; for the quota that only ever
refuses more, never grants more.
"""

from __future__ import annotations

import asyncio

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT_S",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_POOL_TIMEOUT_S",
    "DEFAULT_RETRIES",
    "DEFAULT_SOCKET_TIMEOUT_S",
    "open_redis",
    "ping",
    "require_bytes_replies",
]

DEFAULT_SOCKET_TIMEOUT_S = 1.0
DEFAULT_CONNECT_TIMEOUT_S = 0.5
# One host process: the cache, the quota store and each open `openings()` iteration (which
# holds one connection for as long as it runs) share these.
DEFAULT_MAX_CONNECTIONS = 32
DEFAULT_POOL_TIMEOUT_S = 1.0
DEFAULT_RETRIES = 1


def open_redis(
    url: str,
    *,
    socket_timeout_s: float = DEFAULT_SOCKET_TIMEOUT_S,
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    pool_timeout_s: float = DEFAULT_POOL_TIMEOUT_S,
    retries: int = DEFAULT_RETRIES,
    client_name: str | None = None,
) -> Redis:
    """A client for ``url`` (``redis://``, ``rediss://`` or ``unix://``) with bounded waits.

    Nothing connects until the first command. The caller owns the client and closes it
    (``await client.aclose()``), which closes its pool. Options given in the URL's query
    string take precedence over these arguments (redis-py's rule), so keep timeouts out of
    it. Replies are bytes (``decode_responses`` stays off): the adapters require that.

    Raises:
        ValueError: a bound that is not positive, or a URL redis-py cannot parse.
    """
    bounds = {
        "socket_timeout_s": socket_timeout_s,
        "connect_timeout_s": connect_timeout_s,
        "pool_timeout_s": pool_timeout_s,
    }
    for name, value in bounds.items():
        if not value > 0:
            msg = f"{name} must be positive"
            raise ValueError(msg)
    if max_connections < 1:
        msg = "max_connections must be at least 1"
        raise ValueError(msg)
    if retries < 0:
        msg = "retries must not be negative"
        raise ValueError(msg)
    pool = BlockingConnectionPool.from_url(
        url,
        max_connections=max_connections,
        timeout=pool_timeout_s,
        socket_timeout=socket_timeout_s,
        socket_connect_timeout=connect_timeout_s,
        retry=Retry(NoBackoff(), retries, supported_errors=(RedisConnectionError,)),
        client_name=client_name,
    )
    return Redis.from_pool(pool)


async def ping(client: Redis, timeout_s: float) -> bool:
    """Whether Redis answers PING within ``timeout_s`` seconds; never raises (for readiness)."""
    try:
        async with asyncio.timeout(timeout_s):
            return bool(await client.ping())
    except (RedisError, OSError, TimeoutError):
        return False


def require_bytes_replies(client: Redis) -> None:
    """Refuse a client whose replies are decoded to ``str``: the adapters read bytes.

    Raises:
        ValueError: the client was opened with ``decode_responses=True``.
    """
    if client.connection_pool.connection_kwargs.get("decode_responses", False):
        msg = "the Redis client must not decode responses (decode_responses=False)"
        raise ValueError(msg)
