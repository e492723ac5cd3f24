"""A tenant's content generation: the token every cached response of the tenant is keyed by.

The internal store takes a document out of retrieval at once — deleted, or re-indexed (and
so Processing, perhaps Quarantined next): such documents are "excluded structurally" (seed
004), and a caller can never receive them. A response cached before would still show the
document's title and fragment until its TTL ran out. So every result-cache key carries the
tenant's generation, a random token held in the same cache (shared by every host process),
and each store action that takes a document out of retrieval replaces the token: entries
computed before are never addressed again, on any host.

A generation the cache does not hold (never set, expired, evicted) is made afresh, never
assumed, so losing one only costs misses. A cache that cannot answer gives no generation,
and the invocation runs uncached.

A renewal is read back. The ``Cache`` port fails open, so a write the cache dropped (a
moment's stall of a shared Redis) looked done, and once the cache answered again every host
read the old generation and served responses showing the removed document until their TTL.
So a renewal is written and read back until the cache holds it, a few times over less than
a second; a renewal still unconfirmed then is logged as an error naming the tenant, and
reported to the caller.
"""

from __future__ import annotations

import asyncio
import logging
import secrets

from esra.core._pipeline.cache_keys import content_generation_key
from esra.core.ports import Cache

__all__ = ["GENERATION_TTL_S", "content_generation", "renew_content_generation"]

# Longer than any result-cache TTL is sensible to configure; when it lapses the next call
# draws a new token and the tenant's cached responses simply miss once.
GENERATION_TTL_S = 24 * 3600.0
# A renewal's writes, read back after each: 0.1 + 0.2 + 0.4 s between them, enough for a
# stall or a failover of a shared cache, and short for the operator's action awaiting it.
_RENEWAL_ATTEMPTS = 4
_RENEWAL_FIRST_WAIT_S = 0.1

_log = logging.getLogger(__name__)


async def content_generation(cache: Cache, tenant_id: str) -> str | None:
    """The tenant's current generation (made afresh when the cache holds none), or ``None``
    when the cache cannot answer."""
    key = content_generation_key(tenant_id)
    try:
        held = await cache.get(key)
    except Exception:
        _log.warning("content generation unreadable for tenant %s", tenant_id, exc_info=True)
        return None
    if held is not None:
        try:
            return held.decode("ascii")
        except UnicodeDecodeError:
            pass  # not ours: replaced below like a missing one
    return await _renew(cache, key)


async def renew_content_generation(cache: Cache, tenant_id: str) -> bool:
    """Replace the tenant's generation: no response cached before is served again.

    Returns whether the cache was seen to hold the new generation; ``False`` (logged as an
    error) means responses cached before may be served until their TTL runs out.
    """
    key = content_generation_key(tenant_id)
    token = secrets.token_hex(16)
    wait_s = _RENEWAL_FIRST_WAIT_S
    for attempt in range(_RENEWAL_ATTEMPTS):
        if await _stored(cache, key, token):
            return True
        if attempt + 1 < _RENEWAL_ATTEMPTS:
            await asyncio.sleep(wait_s)
            wait_s *= 2
    _log.error(
        "content generation of tenant %s not renewed: responses cached before a document "
        "left retrieval may be served until their TTL runs out",
        tenant_id,
    )
    return False


async def _stored(cache: Cache, key: str, token: str) -> bool:
    """Write ``token`` under ``key`` and read it back; whether the cache holds it."""
    value = token.encode("ascii")
    try:
        await cache.set(key, value, GENERATION_TTL_S)
        return await cache.get(key) == value
    except Exception:
        _log.warning("content generation not renewed (%s)", key, exc_info=True)
        return False


async def _renew(cache: Cache, key: str) -> str | None:
    token = secrets.token_hex(16)
    try:
        await cache.set(key, token.encode("ascii"), GENERATION_TTL_S)
    except Exception:
        _log.warning("content generation not renewed (%s)", key, exc_info=True)
        return None
    return token
