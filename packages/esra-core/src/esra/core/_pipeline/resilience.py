"""Per-source resilience for query execution: circuit breaker, concurrency limiters, retry.

The order, outer to inner, is Polly's standard one (see REFERENCES "Resilience"): retry
(transient codes only, exponential backoff with jitter, via stamina) → circuit breaker
(consecutive failures, per source) → concurrency limiters → attempt timeout. stamina provides
only the retry; the breaker and limiters are here because stamina has neither.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable
from enum import StrEnum
from typing import TypeVar

import stamina

from esra.core.codes import RETRYABLE_PROVIDER_ERRORS, ProviderErrorCode
from esra.core.exceptions import ProviderError
from esra.core.ports import Clock

__all__ = [
    "BreakerState",
    "CircuitBreaker",
    "ProviderLimiters",
    "bounded_semaphore",
    "is_retryable",
    "retry_transient",
]

T = TypeVar("T")

# Backoff between attempts. The invocation deadline bounds the total, so stamina's own
# wall-clock timeout is switched off rather than left at its 45 s default.
_WAIT_INITIAL_S = 0.05
_WAIT_MAX_S = 1.0
_WAIT_JITTER_S = 0.1


class BreakerState(StrEnum):
    """The three states of a circuit breaker."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class CircuitBreaker:
    """Opens after ``threshold`` consecutive failures; half-opens ``reset_s`` later.

    While open, ``admit`` raises ``ProviderError(CIRCUIT_OPEN)`` without the provider being
    called. Once ``reset_s`` has passed on the injected clock, exactly one trial is admitted:
    success closes the breaker, failure re-opens it for another ``reset_s``. Time comes only
    from ``clock.monotonic()``, so tests drive it with a fake clock.

    ``on_change`` (optional) is called with the state entered on each real transition:
    closed → open, open → half_open when a trial is admitted (the clock alone only makes
    one possible), half_open → closed or open, and open → closed when an attempt admitted
    before the breaker opened succeeds. Re-opening an open breaker is no transition.
    """

    def __init__(
        self,
        *,
        clock: Clock,
        threshold: int,
        reset_s: float,
        on_change: Callable[[BreakerState], None] | None = None,
    ) -> None:
        self._clock = clock
        self._threshold = max(1, threshold)
        self._reset_s = reset_s
        self._on_change = on_change
        self._failures = 0
        self._opened_at: float | None = None
        self._trial_in_flight = False
        # The state last announced to ``on_change``: half_open only once a trial is admitted.
        self._announced = BreakerState.CLOSED

    @property
    def state(self) -> BreakerState:
        """The current state, as of the clock's current reading."""
        if self._opened_at is None:
            return BreakerState.CLOSED
        if self._clock.monotonic() - self._opened_at >= self._reset_s:
            return BreakerState.HALF_OPEN
        return BreakerState.OPEN

    @property
    def consecutive_failures(self) -> int:
        """Failures recorded since the last success."""
        return self._failures

    def admit(self) -> None:
        """Let one attempt through, or raise ``ProviderError(CIRCUIT_OPEN)``."""
        state = self.state
        if state is BreakerState.CLOSED:
            return
        if state is BreakerState.HALF_OPEN and not self._trial_in_flight:
            self._trial_in_flight = True
            self._enter(BreakerState.HALF_OPEN)
            return
        raise ProviderError(ProviderErrorCode.CIRCUIT_OPEN)

    def record_success(self) -> None:
        """Close the breaker and forget past failures."""
        self._failures = 0
        self._opened_at = None
        self._trial_in_flight = False
        self._enter(BreakerState.CLOSED)

    def record_failure(self) -> None:
        """Count a failure; open (or re-open) the breaker at the threshold or after a trial."""
        self._failures += 1
        if self._trial_in_flight or self._failures >= self._threshold:
            self._opened_at = self._clock.monotonic()
            self._enter(BreakerState.OPEN)
        self._trial_in_flight = False

    def open_for(self, seconds: float) -> None:
        """Open for ``seconds`` from now, as another instance's breaker of this source did.

        Never shortens an opening already in force, and never lasts longer than
        ``reset_s``; afterwards the breaker half-opens and makes its own trial as usual.
        """
        if not seconds > 0:
            return
        opened_at = self._clock.monotonic() - max(0.0, self._reset_s - seconds)
        if self._opened_at is not None and self._opened_at >= opened_at:
            return
        self._opened_at = opened_at
        self._failures = max(self._failures, self._threshold)
        self._enter(BreakerState.OPEN)

    def release(self) -> None:
        """Forget an admitted attempt that neither succeeded nor failed (it was cancelled).

        A cancelled half-open trial says nothing about the source, so the next caller may try.
        """
        self._trial_in_flight = False

    def _enter(self, state: BreakerState) -> None:
        """Announce ``state`` to ``on_change`` unless it is the state last announced."""
        if state is self._announced:
            return
        self._announced = state
        if self._on_change is not None:
            self._on_change(state)


def bounded_semaphore(limit: int) -> asyncio.Semaphore:
    """Return a semaphore admitting ``limit`` holders (at least one, so nothing deadlocks)."""
    return asyncio.Semaphore(max(1, limit))


class ProviderLimiters:
    """One semaphore per provider object, shared by every source and invocation using it.

    Keyed by identity (``id()``), as providers need not be hashable. An entry is removed when
    its provider is garbage-collected, so a configuration reload that replaces providers does
    not grow the table; a provider that cannot be weakly referenced is kept alive instead.
    """

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._semaphores: dict[int, asyncio.Semaphore] = {}
        self._pinned: dict[int, object] = {}

    def __len__(self) -> int:
        return len(self._semaphores)

    def for_provider(self, provider: object) -> asyncio.Semaphore:
        """Return ``provider``'s semaphore, creating it on first use."""
        key = id(provider)
        semaphore = self._semaphores.get(key)
        if semaphore is None:
            semaphore = self._semaphores[key] = bounded_semaphore(self._limit)
            try:
                weakref.finalize(provider, self._semaphores.pop, key, None)
            except TypeError:
                # No weak references: pin it, so its id cannot be reused by another object.
                self._pinned[key] = provider
        return semaphore


def is_retryable(exc: BaseException) -> bool:
    """Return whether ``exc`` is a provider error worth another attempt.

    Any ``BaseException``: stamina's retry hook is typed so since 26.2, and a cancellation
    is then simply not retryable.

    Only CONNECTION_REFUSED, RESOURCE_EXHAUSTED and TIMEOUT are; CIRCUIT_OPEN never is, since
    the breaker already decided, and nothing unclassified is.
    """
    return isinstance(exc, ProviderError) and exc.code in RETRYABLE_PROVIDER_ERRORS


async def retry_transient(attempt: Callable[[], Awaitable[T]], *, attempts: int) -> T:
    """Await ``attempt()`` up to ``attempts`` times while it fails with a retryable error.

    Backoff is exponential with jitter (stamina). The last error is re-raised unchanged;
    ``asyncio.CancelledError`` is never retried. Tests disable the backoff with
    ``stamina.set_testing(True, attempts=..., cap=True)``.
    """
    try:
        return await attempt()
    except Exception as exc:
        if not is_retryable(exc):
            raise
        failures = [exc]
    # Setting up stamina's retry loop costs more than a fast query's own Python work, and
    # nearly every first attempt succeeds, so the loop starts only after a transient failure.
    # It then replays that failure as its own first attempt: attempt counting, backoff
    # before the next try, on-retry hooks and test mode stay exactly stamina's.

    async def replaying() -> T:
        if failures:
            raise failures.pop()
        return await attempt()

    async for try_ in stamina.retry_context(
        on=is_retryable,
        attempts=max(1, attempts),
        timeout=None,
        wait_initial=_WAIT_INITIAL_S,
        wait_max=_WAIT_MAX_S,
        wait_jitter=_WAIT_JITTER_S,
    ):
        with try_:
            return await replaying()
    # stamina re-raises the last error once attempts run out, so the loop never ends here.
    raise AssertionError("unreachable")  # pragma: no cover
