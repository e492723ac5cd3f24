"""esra-redis: state shared by many runtime instances on one Redis.

``RedisCache`` (the ``Cache`` port; fails open), ``RedisQuotaStore`` (the ``QuotaStore`` port;
fails closed) and ``RedisBreakerBroadcast`` (the ``BreakerBroadcast`` port; fails open), each
on a client the host opens with ``open_redis`` and closes itself.
"""

from esra.redis._breaker_broadcast import (
    DEFAULT_BREAKER_CHANNEL,
    DEFAULT_BREAKER_PREFIX,
    DEFAULT_BREAKER_TIMEOUT_S,
    RedisBreakerBroadcast,
)
from esra.redis._cache import DEFAULT_CACHE_PREFIX, DEFAULT_CACHE_TIMEOUT_S, RedisCache
from esra.redis._client import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_POOL_TIMEOUT_S,
    DEFAULT_SOCKET_TIMEOUT_S,
    open_redis,
    ping,
    require_bytes_replies,
)
from esra.redis._quota import DEFAULT_QUOTA_PREFIX, DEFAULT_QUOTA_TIMEOUT_S, RedisQuotaStore

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_BREAKER_CHANNEL",
    "DEFAULT_BREAKER_PREFIX",
    "DEFAULT_BREAKER_TIMEOUT_S",
    "DEFAULT_CACHE_PREFIX",
    "DEFAULT_CACHE_TIMEOUT_S",
    "DEFAULT_CONNECT_TIMEOUT_S",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_POOL_TIMEOUT_S",
    "DEFAULT_QUOTA_PREFIX",
    "DEFAULT_QUOTA_TIMEOUT_S",
    "DEFAULT_SOCKET_TIMEOUT_S",
    "RedisBreakerBroadcast",
    "RedisCache",
    "RedisQuotaStore",
    "open_redis",
    "ping",
    "require_bytes_replies",
]
