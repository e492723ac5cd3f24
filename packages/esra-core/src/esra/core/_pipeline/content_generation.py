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
"""

from __future__ import annotations

import logging
import secrets

from esra.core._pipeline.cache_keys import content_generation_key
from esra.core.ports import Cache

__all__ = ["GENERATION_TTL_S", "content_generation", "renew_content_generation"]

# Longer than any result-cache TTL is sensible to configure; when it lapses the next call
# draws a new token and the tenant's cached responses simply miss once.
GENERATION_TTL_S = 24 * 3600.0

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


async def renew_content_generation(cache: Cache, tenant_id: str) -> None:
    """Replace the tenant's generation: no response cached before is served again."""
    await _renew(cache, content_generation_key(tenant_id))


async def _renew(cache: Cache, key: str) -> str | None:
    token = secrets.token_hex(16)
    try:
        await cache.set(key, token.encode("ascii"), GENERATION_TTL_S)
    except Exception:
        _log.warning("content generation not renewed (%s)", key, exc_info=True)
        return None
    return token
