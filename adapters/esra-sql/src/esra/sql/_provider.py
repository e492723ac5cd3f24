"""SqlSearchProvider: the one ``SearchProvider`` shell every SQL engine is built from.

Every SQL provider does the same around its driver: it states its capabilities, refuses a
query the validator did not issue, builds (or reuses) the shared SQLAlchemy statement, turns
a build failure into ``UNKNOWN`` without its text (a ``ProviderError`` the dialect raised,
refusing a name its engine cannot have, keeps its code), maps driver rows back to business
fields, and reports health from which of its mappings are ready. ``SqlSearchProvider`` does
that once.

What differs is an engine's own, supplied as a ``SqlEngine`` part:

* ``statement_builder()`` — the builder with the engine's dialect and full-text strategy
  (MySQL's exists only once the first connection has learnt the server's token rules);
* ``run(built, query, budget)`` — how one built statement runs: asynchronous psycopg on a
  pool, a synchronous driver on pinned threads (``esra.sql._threads``), an SQLite file; the
  engine's transaction fences, server-side time limits, cancellation and error classifier
  live there;
* ``readiness(mappings)`` — the engine's health query: whether each mapping's relation and
  text index exist.

Closing is the engine's too, and so the engine's public provider class offers it: SQLite
closes synchronously, the server engines asynchronously.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

import attrs

from esra.core.codes import ProviderErrorCode
from esra.core.config import FieldType, Mapping, Operator, SourceHealth
from esra.core.exceptions import ProviderError
from esra.core.ports import (
    ProviderCapabilities,
    RenderedStatement,
    TextIndexKind,
    TextRendering,
)
from esra.core.providers import ResultRow, Strategy, ValidatedQuery, ensure_validated
from esra.sql._builder import BuiltStatement, StatementBuilder

__all__ = [
    "HEALTH_TIMEOUT_S",
    "EngineTraits",
    "SqlEngine",
    "SqlSearchProvider",
    "TimeBudget",
]

# How long one health check may take unless the engine lets it be configured.
HEALTH_TIMEOUT_S = 5.0

# What an engine's ``builder`` is: always a builder, or ``None`` until the server is known.
Builder_co = TypeVar("Builder_co", bound=StatementBuilder | None, covariant=True)
_Builder = TypeVar("_Builder", bound=StatementBuilder | None)


@attrs.frozen
class EngineTraits:
    """What the shell needs to know of an engine beyond its steps.

    Attributes:
        name: the engine's name as log messages give it; its logger is ``esra.<name>``.
        text_index: the text-index kind stated in the provider's capabilities.
        terms_need_text_index: a query with terms needs the mapping to name its text index
            (a tsvector column, an FTS5 table): without one it is ``TEXT_INDEX_UNAVAILABLE``
            before anything is built.
        dates_as_datetimes: the driver returns DATE fields as ``datetime`` (SQL Server's
            ``datetime`` columns, Oracle's DATE); the shell hands them back as dates.
    """

    name: str
    text_index: TextIndexKind
    terms_need_text_index: bool = False
    dates_as_datetimes: bool = False


@attrs.frozen
class TimeBudget:
    """One execution's time: the caller's ``timeout_s`` and when it runs out.

    Each engine spends it its own way: most give their driver the whole ``seconds`` from
    the moment the statement is about to run; an engine whose setup may take a while on
    first use (MySQL learns the server then) counts from the call, to ``deadline``.

    Attributes:
        seconds: the ``timeout_s`` the caller passed.
        deadline: ``time.monotonic()`` when the call began, plus ``seconds``.
    """

    seconds: float
    deadline: float

    @classmethod
    def start(cls, seconds: float) -> TimeBudget:
        """The budget of an execution starting now."""
        return cls(seconds, time.monotonic() + seconds)

    def remaining(self) -> float:
        """Seconds left before ``deadline`` (never negative)."""
        return max(self.deadline - time.monotonic(), 0.0)


class SqlEngine(Protocol[Builder_co]):
    """**Protocol:** what one SQL engine supplies to ``SqlSearchProvider``."""

    @property
    def traits(self) -> EngineTraits:
        """The engine's name, text-index kind and row conventions."""
        ...

    @property
    def builder(self) -> Builder_co:
        """The statement builder, or ``None`` while it still depends on the server."""
        ...

    async def statement_builder(self) -> StatementBuilder:
        """The builder to build an execution's statement with (connecting first if it must).

        Raises:
            ProviderError: the classified failure of whatever it had to do first.
        """
        ...

    async def run(
        self, built: BuiltStatement, query: ValidatedQuery, budget: TimeBudget
    ) -> Sequence[Sequence[Any]]:
        """Run ``built`` read-only within ``budget`` and return the driver's rows.

        Raises:
            ProviderError: for every failure, with its classified code.
            asyncio.CancelledError: if the awaiting task is cancelled (the engine stops the
                statement first, as far as its driver allows).
        """
        ...

    async def readiness(self, mappings: Sequence[Mapping]) -> Sequence[bool]:
        """Whether each mapping is searchable (relation and text index exist), in order.

        Raises:
            Exception: when the source cannot be checked at all; the shell reports it
                ``UNAVAILABLE`` and logs it.
        """
        ...


Engine_co = TypeVar("Engine_co", bound=SqlEngine[StatementBuilder | None], covariant=True)


class SqlSearchProvider(Generic[Engine_co]):
    """A read-only ``SearchProvider`` over one SQL source, its engine supplied by ``engine``.

    Args:
        engine: the engine's part: its builder, how a statement runs, its health query.
        mappings: the source's mappings, checked by ``health()``; executions use the
            mapping carried by each query.
        max_rows: the largest row cap this provider accepts (stated in ``capabilities``).
        rendering: how the engine renders search content, for the validator to measure
            plans with (``None``: no limits stated).
        max_text_condition_length / max_command_length: the engine's limits on one
            full-text search condition and on command text, as ``rendering`` measures them.
        max_scored_terms: the most terms one statement can search for and score (``None``:
            no stated limit); the validator refuses a query with more as
            ``TERM_LIMIT_EXCEEDED``.
    """

    def __init__(
        self,
        engine: Engine_co,
        *,
        mappings: Sequence[Mapping] = (),
        max_rows: int = 200,
        rendering: TextRendering | None = None,
        max_text_condition_length: int | None = None,
        max_command_length: int | None = None,
        max_scored_terms: int | None = None,
    ) -> None:
        self._engine = engine
        self._traits = engine.traits
        self._log = logging.getLogger(f"esra.{self._traits.name}")
        self._mappings = tuple(mappings)
        self._capabilities = ProviderCapabilities(
            strategies=frozenset(Strategy),
            operators=frozenset(Operator),
            text_index=self._traits.text_index,
            max_rows=max_rows,
            rendering=rendering,
            max_text_condition_length=max_text_condition_length,
            max_command_length=max_command_length,
            max_scored_terms=max_scored_terms,
        )

    @property
    def capabilities(self) -> ProviderCapabilities:
        """All six strategies, every operator, the engine's text-index kind, and the limits
        the engine states with the rendering that measures them."""
        return self._capabilities

    @property
    def builder(self: SqlSearchProvider[SqlEngine[_Builder]]) -> _Builder:
        """The statement builder (exposed for inspection and cache statistics)."""
        return self._engine.builder

    def render_statement(self, query: ValidatedQuery) -> RenderedStatement:
        """The statement ``execute`` sends for ``query``, without its values (for explain).

        Raises:
            ProviderError: ``UNKNOWN`` while the statement still depends on what the first
                connection learns (MySQL's server flavour).
        """
        builder = self._engine.builder
        if builder is None:
            raise ProviderError(ProviderErrorCode.UNKNOWN)
        return builder.render(query)

    async def execute(self, query: ValidatedQuery, *, timeout_s: float) -> Sequence[ResultRow]:
        """Run ``query`` within ``timeout_s`` seconds and return its rows, best first.

        Raises:
            UnvalidatedQueryError: if the validator did not issue ``query``.
            ProviderError: for every failure, with its classified code.
            asyncio.CancelledError: if the awaiting task is cancelled (the engine stops the
                statement first, as far as its driver allows).
        """
        query = ensure_validated(query)
        budget = TimeBudget.start(timeout_s)
        traits = self._traits
        if traits.terms_need_text_index and _has_terms(query) and not query.mapping.text_index:
            self._log.warning(
                "%s mapping %s has no text index configured", self._traits.name, query.mapping.id
            )
            raise ProviderError(ProviderErrorCode.TEXT_INDEX_UNAVAILABLE)
        builder = await self._engine.statement_builder()
        try:
            built = builder.build(query)
        except ProviderError as exc:
            # The dialect refused a configured name its engine cannot have, and said why.
            self._log.warning(
                "%s statement refused for %s as %s",
                self._traits.name,
                query.query_id,
                exc.code.value,
            )
            raise
        except Exception as exc:
            self._log.warning(
                "%s statement could not be built for %s", self._traits.name, query.query_id
            )
            raise ProviderError(ProviderErrorCode.UNKNOWN) from exc
        raw = await self._engine.run(built, query, budget)
        rows = [built.to_row(row) for row in raw]
        if self._traits.dates_as_datetimes:
            return [_dates_of_date_fields(row, query.mapping) for row in rows]
        return rows

    async def health(self) -> SourceHealth:
        """``HEALTHY`` if the source answers and every mapping is ready.

        ``DEGRADED`` when only some mappings are ready, ``UNAVAILABLE`` when none is or the
        source cannot be used. Never raises.
        """
        try:
            ready = await self._engine.readiness(self._mappings)
        except ProviderError as exc:
            self._log.warning("%s health check failed as %s", self._traits.name, exc.code.value)
            return SourceHealth.UNAVAILABLE
        except Exception as exc:  # health reports, it never raises
            self._log.warning("%s health check failed: %r", self._traits.name, exc)
            return SourceHealth.UNAVAILABLE
        if all(ready):
            return SourceHealth.HEALTHY
        return SourceHealth.DEGRADED if any(ready) else SourceHealth.UNAVAILABLE


def _has_terms(query: ValidatedQuery) -> bool:
    return any((query.required_terms, query.optional_terms, query.excluded_terms, query.phrases))


def _dates_of_date_fields(row: ResultRow, mapping: Mapping) -> ResultRow:
    """``row`` with the ``datetime`` values of the mapping's DATE fields as dates."""
    dates = {f.name for f in mapping.fields if f.type is FieldType.DATE}
    values = dict(row.values)
    changed = False
    for name in dates & set(values):
        value = values[name]
        if isinstance(value, datetime):
            values[name] = value.date()
            changed = True
    return attrs.evolve(row, values=values) if changed else row
