"""The values the pipeline's stages hand each other and its ports speak, free of any stage.

What a provider can do (``ProviderCapabilities``, with the ``TextRendering`` that measures
its statements against the engine's limits) and the sealed ``ValidatedQuery`` it executes.
They live apart from the validator and the ports so that both can import them without a
cycle: the ports type-check against them, stage 4 (``esra.core._pipeline.validation``)
issues them, and nothing here imports a stage.

A provider executes nothing but a ``ValidatedQuery`` the validator issued: the constructor
demands a module-private seal, and every issued instance is remembered by identity, so a
forged, copied, unpickled or ``evolve``-d object is refused by ``ensure_validated``. Only the
validator calls ``_issue`` (tests that bypass it on purpose say so).
"""

from __future__ import annotations

import weakref
from enum import StrEnum
from typing import Any, NoReturn, Protocol

import attrs

from esra.core._config.mapping import Mapping, Operator
from esra.core._query import ProjectedField, ResolvedFilter, Strategy
from esra.core._record_predicate import RecordPredicate, predicate_shape
from esra.core.exceptions import UnvalidatedQueryError

__all__ = [
    "ProviderCapabilities",
    "RenderedLengths",
    "TextIndexKind",
    "TextRendering",
    "ValidatedQuery",
    "ensure_validated",
]


class TextIndexKind(StrEnum):
    """The full-text machinery a provider searches with, stated so nothing has to guess."""

    SQLITE_FTS5 = "sqlite_fts5"
    POSTGRES_TSVECTOR = "postgres_tsvector"
    MYSQL_FULLTEXT = "mysql_fulltext"
    SQLSERVER_FULLTEXT = "sqlserver_fulltext"
    ORACLE_TEXT = "oracle_text"
    IN_MEMORY = "in_memory"


@attrs.frozen
class RenderedLengths:
    """How long a query's statement is once its provider has rendered it, in the unit the
    provider's stated limits count (SQL Server: UTF-16 code units).

    Attributes:
        text_conditions: each full-text search condition the provider would bind (a
            CONTAINS phrase, a FREETEXT string, an Oracle Text expression), in bind order.
        command: the longest piece of command text the provider would send with them (the
            statement, or whatever else travels as text beside it).
    """

    text_conditions: tuple[int, ...]
    command: int


class TextRendering(Protocol):
    """**Protocol:** how a provider renders search content, stated so the validator can hold
    a plan to the engine's limits exactly, before any statement is sent.

    Implementations answer from the same code that renders the statement at execution, so
    the validator's measure and what the engine receives cannot drift apart.
    """

    def renders_empty(self, term: str) -> bool:
        """Whether ``term`` (stripped, checked safe) leaves nothing to search once rendered:
        sent as it is, the engine would refuse it as an empty search condition."""
        ...

    def rendered_lengths(self, query: ValidatedQuery) -> RenderedLengths | None:
        """The lengths of ``query``'s statement as the provider would send it, or ``None``
        when the statement cannot be built at all (execution then fails as it always has)."""
        ...


def _needs_rendering(
    instance: ProviderCapabilities, attribute: attrs.Attribute[int | None], value: int | None
) -> None:
    if value is None:
        return
    if value < 1:
        msg = f"{attribute.name} must be at least 1"
        raise ValueError(msg)
    if instance.rendering is None:
        # A limit nothing can measure a plan against would be a promise the validator breaks.
        msg = f"{attribute.name} needs the rendering that measures it"
        raise ValueError(msg)


@attrs.frozen
class ProviderCapabilities:
    """What a provider supports: the validator rejects anything else before execution.

    Attributes:
        strategies / operators: the strategies and filter operators it runs.
        text_index: the full-text machinery it searches with.
        max_rows: the largest row cap it accepts.
        rendering: how it renders search content (``None``: every non-blank term renders to
            something, and no length limit is stated).
        max_text_condition_length: the longest full-text search condition the engine
            accepts, as ``rendering`` measures it; ``None``: no stated limit.
        max_command_length: the longest piece of command text the provider can send, as
            ``rendering`` measures it; ``None``: no stated limit.
        max_scored_terms: the most terms one statement can search for and score — required
            terms, optional words and phrases, counted after the validator has split
            optional terms into words and dropped what renders to nothing (excluded terms
            are not scored); ``None``: no stated limit.
    """

    strategies: frozenset[Strategy]
    operators: frozenset[Operator]
    text_index: TextIndexKind
    max_rows: int = 200
    rendering: TextRendering | None = attrs.field(default=None, kw_only=True)
    max_text_condition_length: int | None = attrs.field(
        default=None, validator=_needs_rendering, kw_only=True
    )
    max_command_length: int | None = attrs.field(
        default=None, validator=_needs_rendering, kw_only=True
    )
    max_scored_terms: int | None = attrs.field(
        default=None,
        validator=attrs.validators.optional(attrs.validators.ge(1)),
        kw_only=True,
    )


_SEAL = object()
_ISSUED: weakref.WeakSet[ValidatedQuery] = weakref.WeakSet()


class ValidatedQuery:
    """A query that passed every validation rule, resolved to physical identifiers.

    Attributes:
        query_id: unique within the invocation (``{source_id}#{n}``).
        source_id: the selected source it runs against.
        mapping: the mapping, whose physical names come from configuration only.
        strategy: one the provider stated it supports.
        required_terms / optional_terms / excluded_terms / phrases: literal search content,
            always sent as bind parameters.
        filters: structured filters, resolved to columns, values as bind parameters.
        record_filters: record-level predicates with the caller's claim values.
        record_predicate: the mapping's record-filter template bound to the caller's claims
            (physical columns, typed values sent as bind parameters); ``None`` without one.
            Providers AND it with ``record_filters``.
        lookup_key: for a document fetch, the one record key to read (a bind parameter);
            ``None`` for a search. A lookup carries no search content.
        projection: the returnable, unrestricted fields to read (title and content included).
        freshness: the freshness field, when the mapping has one.
        row_limit: the row cap the provider puts in the statement.
    """

    __slots__ = (
        "__weakref__",
        "excluded_terms",
        "filters",
        "freshness",
        "lookup_key",
        "mapping",
        "optional_terms",
        "phrases",
        "projection",
        "query_id",
        "record_filters",
        "record_predicate",
        "required_terms",
        "row_limit",
        "source_id",
        "strategy",
    )

    query_id: str
    source_id: str
    mapping: Mapping
    strategy: Strategy
    required_terms: tuple[str, ...]
    optional_terms: tuple[str, ...]
    excluded_terms: tuple[str, ...]
    phrases: tuple[str, ...]
    filters: tuple[ResolvedFilter, ...]
    record_filters: tuple[ResolvedFilter, ...]
    record_predicate: RecordPredicate | None
    lookup_key: str | None
    projection: tuple[ProjectedField, ...]
    freshness: ProjectedField | None
    row_limit: int

    def __init__(self, seal: object, **values: Any) -> None:
        if seal is not _SEAL:
            msg = "ValidatedQuery can only be constructed by the validator"
            raise UnvalidatedQueryError(msg)
        for name, value in values.items():
            object.__setattr__(self, name, value)
        _ISSUED.add(self)

    def __setattr__(self, name: str, value: object) -> NoReturn:
        msg = "ValidatedQuery is immutable"
        raise AttributeError(msg)

    def __reduce__(self) -> NoReturn:
        msg = "ValidatedQuery cannot be copied or pickled"
        raise TypeError(msg)

    def __repr__(self) -> str:
        # Terms stay out of the repr: it may reach a log line.
        return f"ValidatedQuery({self.query_id!r}, strategy={self.strategy.value!r})"

    @property
    def shape(self) -> tuple[object, ...]:
        """What determines the command text (never the values): for statement caching."""
        return (
            self.mapping,
            self.strategy,
            len(self.required_terms),
            len(self.optional_terms),
            len(self.excluded_terms),
            len(self.phrases),
            tuple((f.column, f.operator, len(f.values)) for f in self.filters),
            tuple((f.column, f.operator, len(f.values)) for f in self.record_filters),
            predicate_shape(self.record_predicate) if self.record_predicate else None,
            tuple(p.column for p in self.projection),
            self.freshness.column if self.freshness else None,
            self.lookup_key is not None,
        )


def ensure_validated(query: object) -> ValidatedQuery:
    """Return ``query`` if the validator issued it; raise ``UnvalidatedQueryError`` otherwise."""
    if not isinstance(query, ValidatedQuery) or query not in _ISSUED:
        msg = "providers execute only validator-issued queries"
        raise UnvalidatedQueryError(msg)
    return query


def _issue(**values: Any) -> ValidatedQuery:
    """The one place a ``ValidatedQuery`` is made; called only by the validator
    (``esra.core._pipeline.validation``) and by tests that bypass it on purpose."""
    # Most mappings have no record-filter template and most queries are searches, not
    # fetch lookups; those absences are explicit Nones.
    values.setdefault("record_predicate", None)
    values.setdefault("lookup_key", None)
    return ValidatedQuery(_SEAL, **values)
