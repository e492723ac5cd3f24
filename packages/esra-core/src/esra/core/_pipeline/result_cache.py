"""Result caching: whole responses, isolated by tenant, caller authorization and configuration.

The key (``esra.core._pipeline.cache_keys.result_cache_key``) covers the tenant, client
application, capability, exposure, configuration version and a digest of the effective scope's
content (everything the stages read: exposure, capability, sources, mappings and their record
filters, narrowed limits, response modes), the caller's effective-authorization fingerprint
and the normalized prompt, so a change to any of them misses — a configuration that reuses
another's version string included. Only complete
responses are kept: a degraded one describes a passing failure, not the answer.

Document references are bound to one caller, so an entry never holds them: it holds the
record locators instead, and every hit mints fresh references for the caller it serves. A
cache backend therefore sees what a response shows plus record keys — never a usable reference
and never the prompt.
"""

from __future__ import annotations

import logging

import attrs
import cattrs
from cattrs.preconf.json import make_converter

from esra.core._context import InvocationContext
from esra.core._fetch.refs import DocumentRefMinter
from esra.core._fetch.tokens import DocumentLocator, Keyring, TokenBinding
from esra.core._fetch.tokens import open as open_ref
from esra.core._pipeline.cache_keys import (
    authorization_fingerprint,
    configuration_fingerprint,
    result_cache_key,
)
from esra.core._pipeline.scope import EffectiveScope
from esra.core._response import ResponseStatus, RetrievalResponse
from esra.core.exceptions import DocumentNotFoundError
from esra.core.ports import Cache, Clock

__all__ = ["CachedResult", "ResultCache"]

_FORMAT = 1
_CONVERTER = make_converter(forbid_extra_keys=True)
_log = logging.getLogger(__name__)


@attrs.frozen
class CachedResult:
    """A response without references, and the locator of each result (``None``: no ref)."""

    format: int
    response: RetrievalResponse
    locators: tuple[DocumentLocator | None, ...]


class ResultCache:
    """Reads and writes one invocation's cached response through the ``Cache`` port."""

    def __init__(
        self,
        cache: Cache,
        ctx: InvocationContext,
        scope: EffectiveScope,
        request: str,
        *,
        clock: Clock,
        keyring: Keyring | None,
        generation: str,
        filters: str = "",
    ) -> None:
        self._cache = cache
        self._ctx = ctx
        self._scope = scope
        self._clock = clock
        self._keyring = keyring
        self.key = result_cache_key(
            tenant_id=ctx.tenant_id,
            client_app_id=ctx.client_app_id,
            capability_id=scope.capability.id,
            exposure_id=scope.exposure.id,
            config_version=scope.config_version,
            # The scope is all the configuration the stages read; its version string may be
            # another configuration's too (a settings file's "3" and workspace version 3).
            configuration=configuration_fingerprint(scope),
            authorization=authorization_fingerprint(
                client_app_id=ctx.client_app_id,
                claims=ctx.caller.claims,
                authorized_source_ids=ctx.authorized_source_ids,
                effective_source_ids=(s.source.id for s in scope.sources),
            ),
            request=request,
            filters=filters,
            top_k=scope.exposure.top_k,
            generation=generation,
        )

    async def load(self, refs: DocumentRefMinter | None) -> RetrievalResponse | None:
        """The cached response for this invocation, with references minted for this caller.

        A backend failure or an unreadable entry is a miss (logged), never an error.
        """
        try:
            raw = await self._cache.get(self.key)
            if raw is None:
                return None
            cached = _CONVERTER.loads(raw, CachedResult)
        except (cattrs.BaseValidationError, ValueError, TypeError):
            _log.warning("unreadable result cache entry for %s", self._ctx.correlation_id)
            return None
        except Exception:
            _log.warning("result cache read failed for %s", self._ctx.correlation_id, exc_info=True)
            return None
        if cached.format != _FORMAT or len(cached.locators) != len(cached.response.results):
            return None
        exposure_id = self._scope.exposure.id
        results = tuple(
            attrs.evolve(
                item,
                document_ref=(
                    refs.mint(exposure_id, locator)
                    if refs is not None
                    and locator is not None
                    and self._scope.exposure.fetch_enabled
                    else None
                ),
            )
            for item, locator in zip(cached.response.results, cached.locators, strict=True)
        )
        return attrs.evolve(
            cached.response, results=results, correlation_id=self._ctx.correlation_id
        )

    async def store(self, response: RetrievalResponse) -> None:
        """Keep ``response`` if it is complete; a backend failure is logged, never raised,
        and a response whose references can no longer be opened is not kept."""
        ttl = self._scope.limits.result_cache_ttl_s
        if ttl <= 0 or response.status is not ResponseStatus.COMPLETE:
            return
        try:
            locators = tuple(self._locator(r.document_ref) for r in response.results)
        except DocumentNotFoundError:
            # A reference expired between minting and now (the answer model ran in between,
            # and references may live a second): the response stands, only caching it is
            # given up — kept without its locators, a hit would drop references it had.
            _log.info("result not cached for %s: a reference expired", self._ctx.correlation_id)
            return
        entry = CachedResult(
            format=_FORMAT,
            response=attrs.evolve(
                response,
                results=tuple(attrs.evolve(r, document_ref=None) for r in response.results),
                correlation_id="",
            ),
            locators=locators,
        )
        try:
            await self._cache.set(self.key, _CONVERTER.dumps(entry).encode(), ttl)
        except Exception:
            _log.warning(
                "result cache write failed for %s", self._ctx.correlation_id, exc_info=True
            )

    def _locator(self, document_ref: str | None) -> DocumentLocator | None:
        # The reference was minted for this caller a moment ago; opening it recovers the
        # locator without the stages having to hand locators around.
        if document_ref is None or self._keyring is None:
            return None
        binding = TokenBinding.for_caller(self._ctx, self._scope.exposure.id)
        return open_ref(document_ref, binding=binding, keyring=self._keyring, clock=self._clock)
