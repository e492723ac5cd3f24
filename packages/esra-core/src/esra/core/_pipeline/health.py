"""Source health for scope resolution: one bounded, shared probe per source, kept briefly.

Scope resolution drops a source its provider reports ``UNAVAILABLE``. Asking the providers
on every invocation would put every probe on every call's path, and during an outage each
concurrent caller would wait out its own probe of the same dead database — the latency of
the outage multiplied by the callers. So, per source:

- a probe's answer is kept for ``ttl_s`` on the injected clock, healthy or not;
- callers that need a source's health while its probe is in flight wait for that probe
  instead of starting their own (single flight), so an outage costs one probe per TTL, not
  one per call — also at the moment a cached answer expires under load;
- a probe is bounded by ``timeout_s``: a provider that has not answered by then is
  ``UNAVAILABLE`` (fail closed), whether or not it honours the cancellation;
- sources are probed concurrently, so a slow source delays no other beyond that bound;
- an answer belongs to the provider that gave it: the providers mapping is read live, and
  when a publication replaces a source's provider (``esra.core._live_config``) the old
  provider's answer — cached or in flight — is never used for the new one, nor kept once
  its source is retired. A source without a provider is ``UNAVAILABLE`` at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping

import attrs

from esra.core._config.source import SourceHealth
from esra.core.ports import Clock, SearchProvider

__all__ = ["HEALTH_PROBE_TIMEOUT_S", "HEALTH_TTL_S", "SourceHealthMonitor"]

HEALTH_TTL_S = 15.0
# Long enough for a cold connection (TCP, TLS, login) to a database a network away, short
# enough that the one caller who waits out a dead source's probe still gets an answer well
# within the default 20 s invocation timeout.
HEALTH_PROBE_TIMEOUT_S = 2.0

_log = logging.getLogger(__name__)


@attrs.frozen
class _Known:
    """A probe's answer, the provider that gave it, and the monotonic reading it is good until."""

    state: SourceHealth
    fresh_until: float
    provider: SearchProvider


class SourceHealthMonitor:
    """Reports each source's health from its provider, probing at most once per TTL.

    Args:
        providers: the search provider of each source, keyed by source id, read live (a
            provider added, replaced or removed later is seen by the next call); a source
            without one is ``UNAVAILABLE``.
        clock: the time source the TTL is measured on.
        ttl_s: how long one probe's answer is used.
        timeout_s: the longest one probe may take before its source counts as unavailable.
    """

    def __init__(
        self,
        providers: Mapping[str, SearchProvider],
        *,
        clock: Clock,
        ttl_s: float = HEALTH_TTL_S,
        timeout_s: float = HEALTH_PROBE_TIMEOUT_S,
    ) -> None:
        if not ttl_s >= 0:
            msg = "ttl_s must not be negative"
            raise ValueError(msg)
        if not timeout_s > 0:
            msg = "timeout_s must be positive"
            raise ValueError(msg)
        self._providers = providers
        self._clock = clock
        self._ttl_s = ttl_s
        self._timeout_s = timeout_s
        self._known: dict[str, _Known] = {}
        # Per source, the probe in flight and the provider it asks.
        self._probes: dict[str, tuple[SearchProvider, asyncio.Task[SourceHealth]]] = {}

    async def health_of(self, source_ids: Iterable[str]) -> dict[str, SourceHealth]:
        """Return the health of each of ``source_ids``; never raises for a provider's fault."""
        self._forget_replaced()
        ids = tuple(dict.fromkeys(source_ids))
        known = {source_id: self._fresh(source_id) for source_id in ids}
        # Almost every call finds every answer fresh: only the rest are awaited, each in a
        # task of its own, so a call costs no task per source when nothing is to be probed.
        pending = [source_id for source_id, state in known.items() if state is None]
        if pending:
            states = await asyncio.gather(*(self._health(source_id) for source_id in pending))
            known.update(zip(pending, states, strict=True))
        return {source_id: state for source_id, state in known.items() if state is not None}

    def _fresh(self, source_id: str) -> SourceHealth | None:
        """The answer ``_health`` would give at once, without a probe; ``None`` if it probes."""
        provider = self._providers.get(source_id)
        if provider is None:
            return SourceHealth.UNAVAILABLE
        known = self._known.get(source_id)
        if (
            known is not None
            and known.provider is provider
            and known.fresh_until > self._clock.monotonic()
        ):
            return known.state
        return None

    def _forget_replaced(self) -> None:
        """Drop every answer whose provider is no longer its source's (replaced, retired).

        Keeps no retired provider alive through the cache, and no old verdict for a new one.
        """
        stale = [
            source_id
            for source_id, known in self._known.items()
            if self._providers.get(source_id) is not known.provider
        ]
        for source_id in stale:
            del self._known[source_id]

    async def _health(self, source_id: str) -> SourceHealth:
        fresh = self._fresh(source_id)
        if fresh is not None:
            return fresh
        provider = self._providers[source_id]
        loop = asyncio.get_running_loop()
        in_flight = self._probes.get(source_id)
        # A probe left behind by another event loop (a test's, say) can never finish here,
        # and one asking a provider since replaced does not answer for the new one.
        if in_flight is None or in_flight[0] is not provider or in_flight[1].get_loop() is not loop:
            task = loop.create_task(
                self._probe(source_id, provider), name=f"esra-health-{source_id}"
            )
            in_flight = (provider, task)
            self._probes[source_id] = in_flight
        # Shielded: one caller giving up (a client gone) must not cancel the probe the
        # others are waiting for; the probe is bounded on its own.
        return await asyncio.shield(in_flight[1])

    async def _probe(self, source_id: str, provider: SearchProvider) -> SourceHealth:
        try:
            state = await self._ask(source_id, provider)
            # Kept only while this provider is still the source's: a replaced one's answer
            # would otherwise be served for its successor until the TTL ran out.
            if self._providers.get(source_id) is provider:
                fresh_until = self._clock.monotonic() + self._ttl_s
                self._known[source_id] = _Known(state, fresh_until, provider)
            return state
        finally:
            in_flight = self._probes.get(source_id)
            if in_flight is not None and in_flight[1] is asyncio.current_task():
                del self._probes[source_id]

    async def _ask(self, source_id: str, provider: SearchProvider) -> SourceHealth:
        # Its own task, waited for with a timeout rather than cancelled into: a provider
        # that swallows the cancellation still cannot hold its source's probe past the bound.
        check = asyncio.ensure_future(provider.health())
        try:
            done, _ = await asyncio.wait({check}, timeout=self._timeout_s)
        except BaseException:
            _abandon(check)
            raise
        if not done:
            _abandon(check)
            _log.warning(
                "health check for source %s did not answer within %s s", source_id, self._timeout_s
            )
            return SourceHealth.UNAVAILABLE
        try:
            # Typed as SourceHealth, checked at run time: scope resolution drops a source
            # only on ``is UNAVAILABLE``, so a plain "unavailable" string would keep it.
            state: object = check.result()
        except Exception:
            _log.warning("health check failed for source %s", source_id, exc_info=True)
            return SourceHealth.UNAVAILABLE
        if not isinstance(state, SourceHealth):
            _log.warning("health check of source %s answered %r", source_id, type(state))
            return SourceHealth.UNAVAILABLE
        return state


def _abandon(check: asyncio.Future[SourceHealth]) -> None:
    """Cancel a check nobody waits for any more, and consume whatever it ends with."""
    check.cancel()
    check.add_done_callback(_consume)


def _consume(check: asyncio.Future[SourceHealth]) -> None:
    if not check.cancelled() and check.exception() is not None:
        _log.debug("abandoned health check ended with %r", check.exception())
