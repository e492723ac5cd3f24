"""The validator and the sealed ``ValidatedQuery`` it alone can construct.

A provider executes nothing but a ``ValidatedQuery`` that this module issued: the constructor
demands a module-private seal, and every issued instance is remembered by identity, so a
forged, copied, unpickled or ``evolve``-d object is refused by ``ensure_validated``.
"""

from __future__ import annotations

import weakref
from typing import Any, NoReturn

from esra.core.config.mapping import Mapping
from esra.core.exceptions import UnvalidatedQueryError
from esra.core.query import ProjectedField, ResolvedFilter, Strategy

__all__ = ["ValidatedQuery", "ensure_validated"]

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
        projection: the returnable, unrestricted fields to read (title and content included).
        freshness: the freshness field, when the mapping has one.
        row_limit: the row cap the provider puts in the statement.
    """

    __slots__ = (
        "__weakref__",
        "excluded_terms",
        "filters",
        "freshness",
        "mapping",
        "optional_terms",
        "phrases",
        "projection",
        "query_id",
        "record_filters",
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
            tuple(p.column for p in self.projection),
            self.freshness.column if self.freshness else None,
        )


def ensure_validated(query: object) -> ValidatedQuery:
    """Return ``query`` if the validator issued it; raise ``UnvalidatedQueryError`` otherwise."""
    if not isinstance(query, ValidatedQuery) or query not in _ISSUED:
        msg = "providers execute only validator-issued queries"
        raise UnvalidatedQueryError(msg)
    return query


def _issue(**values: Any) -> ValidatedQuery:
    """The one place a ``ValidatedQuery`` is made; called only by the rules below."""
    return ValidatedQuery(_SEAL, **values)
