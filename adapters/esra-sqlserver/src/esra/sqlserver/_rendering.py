"""What SQL Server accepts, stated to the validator and measured with execution's own code.

Two limits bound a statement this provider sends, both counted in UTF-16 code units:

- a full-text search condition (a CONTAINSTABLE phrase, the FREETEXTTABLE string) is
  ``nvarchar`` and may not be ``nvarchar(max)`` (documented for CONTAINS and FREETEXT), so it
  holds at most 4,000 byte-pairs — the same bound as one RPC character parameter;
- the statement text and its parameter definition each travel as one RPC character
  parameter (``esra.sqlserver._rpc``): 4,000 units. Every required term, phrase and excluded
  term adds a ranked function (and the mapping's column list) to the statement, so about 32
  short terms already exceed it on an ordinary mapping.

``SqlServerTextRendering`` measures a query by building its statement with the provider's
own builder and composing the very ``sp_executesql`` call ``rpc_statement`` would send,
so the validator's measure is exact and cannot drift from what execution does.
"""

from __future__ import annotations

from esra.core.ports import RenderedLengths
from esra.core.providers import ValidatedQuery
from esra.sql import SearchTerms, StatementBuilder
from esra.sqlserver._fulltext import SqlServerFullText, renders_empty
from esra.sqlserver._rpc import MAX_NVARCHAR_UNITS, bindable, compose_rpc, utf16_units
from esra.sqlserver._values import rpc_values

__all__ = ["MAX_COMMAND_UNITS", "MAX_TEXT_CONDITION_UNITS", "SqlServerTextRendering"]

MAX_TEXT_CONDITION_UNITS = MAX_NVARCHAR_UNITS
MAX_COMMAND_UNITS = MAX_NVARCHAR_UNITS
# What each ranked join writes at the least: its function's name.
_JOIN_AT_LEAST = len("CONTAINSTABLE(")


class SqlServerTextRendering:
    """The ``TextRendering`` SQL Server's capabilities state, over the provider's builder."""

    def __init__(self, builder: StatementBuilder) -> None:
        self._builder = builder
        self._fulltext = SqlServerFullText()

    def renders_empty(self, term: str) -> bool:
        """Whether ``term`` would be bound as an empty full-text condition."""
        return renders_empty(term)

    def rendered_lengths(self, query: ValidatedQuery) -> RenderedLengths | None:
        """The UTF-16 lengths of ``query``'s full-text conditions, and of the longer of its
        statement text and parameter definition, exactly as ``rpc_statement`` sends them.

        ``None`` when the statement cannot be built or composed; execution then refuses it
        as it always has.
        """
        terms = SearchTerms(
            required=query.required_terms,
            optional=query.optional_terms,
            excluded=query.excluded_terms,
            phrases=query.phrases,
        )
        conditions = tuple(
            utf16_units(str(bindable(value)))
            for value in self._fulltext.bind_values(terms).values()
        )
        try:
            built = self._builder.build(query)
            statement = compose_rpc(built.sql, rpc_values(built, query))
        except RecursionError:
            # Only some hundreds of ranked joins (one per required term and phrase) are
            # deeper than SQLAlchemy can walk, and each writes at least its function's name:
            # the statement is measured at that lower bound, far past MAX_COMMAND_UNITS.
            # Left to execution, it failed there as UNKNOWN.
            joins = len(query.required_terms) + len(query.phrases)
            return RenderedLengths(text_conditions=conditions, command=joins * _JOIN_AT_LEAST)
        except Exception:
            # Whatever stops the build here stops it at execution, which classifies it.
            return None
        command = max(utf16_units(statement.text), utf16_units(statement.definition))
        return RenderedLengths(text_conditions=conditions, command=command)
