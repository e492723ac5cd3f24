"""SQL Server full-text search as a ``FullTextDialect``: ranked table functions, values bound.

User text never reaches a ``CONTAINS`` search condition unquoted (where ``AND``, ``OR``,
``NEAR``, ``FORMSOF``, ``*`` and friends are syntax). Every term travels in its own bind
parameter and is joined on the full-text key:

- each required term and each phrase: ``CONTAINSTABLE(t, (cols), :tN)`` (inner join) with the
  value ``'"' + text + '"'`` — any ``"`` inside removed, so the value is always exactly one
  quoted phrase, which SQL Server's parser never reads as an operator; and every ``*``
  replaced by a space, since inside double quotes an asterisk before the closing quote makes
  the term a prefix term (``"top*"`` matches every word starting with ``top``). Nothing else
  inside a quoted phrase is syntax: it is the word breaker's input, whose punctuation
  separates words;
- the optional terms together: ``FREETEXTTABLE(t, (cols), :q)`` — FREETEXT gives no operator
  any meaning (word-broken, stemmed, thesaurus), and ``"`` is removed from ``:q`` because a
  quoted FREETEXT string switches to phrase matching. Inner-joined when it is all the query
  has, left-joined (a score boost only) next to required terms or phrases;
- each excluded term: ``NOT EXISTS (SELECT 1 FROM CONTAINSTABLE(t, (cols), :txN) ... )``;
- the score is the sum of the joined functions' ``RANK``.

A term made only of what is removed or blanked (``"``, ``*``) would be an empty search
condition, which SQL Server refuses (error 7645); ``renders_empty`` tells the validator, which
drops such an optional or excluded term and rejects such a required term or phrase, so no
empty condition is ever bound.

The table and column arguments are identifiers from configuration, quoted by the dialect's
identifier preparer at compile time; the schema always as one identifier
(``esra.sql.schema_identifier``).
"""

from __future__ import annotations

import functools
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.expression import ColumnElement
from sqlalchemy.sql.visitors import InternalTraversal

from esra.sql import FullTextClause, SearchTerms, TermShape, TextTarget, schema_identifier

__all__ = [
    "OPTIONAL_BIND",
    "SqlServerFullText",
    "containstable_phrase",
    "freetext_string",
    "renders_empty",
]

OPTIONAL_BIND = "q"
KEY_COLUMN = "KEY"
RANK_COLUMN = "RANK"


def _clean(text: str) -> str:
    # NUL would end the command text inside the driver's C string; it is never part of a
    # word, so it becomes a word separator.
    return text.replace("\x00", " ").replace('"', "")


def containstable_phrase(text: str) -> str:
    """Return ``text`` as a CONTAINS search condition that is one quoted phrase, nothing else.

    ``"`` is removed (a CONTAINS phrase has no escape for it), so the value always starts and
    ends with the only two double quotes in it. ``*`` becomes a space: within the quotes, an
    asterisk before the closing one turns the term into a prefix term (``"a*"`` matches every
    word starting with ``a``), and the word breaker drops it anyway, so the value is always a
    simple term or phrase matched literally.
    """
    return '"' + _clean(text).replace("*", " ") + '"'


def freetext_string(terms: tuple[str, ...]) -> str:
    """Return the FREETEXT string for ``terms``: words only, with every ``"`` removed."""
    return " ".join(_clean(term) for term in terms)


def renders_empty(term: str) -> bool:
    """Whether ``term`` leaves only whitespace once rendered, as a quoted CONTAINS phrase or
    as FREETEXT words: ``""`` (or ``"   "``) is an empty search condition to SQL Server.

    Judged by the stricter CONTAINS rendering for every kind of term: an optional term of
    asterisks that FREETEXT would keep is still nothing the word breaker searches for.
    """
    return not _clean(term).replace("*", " ").strip()


def required_bind(index: int) -> str:
    """Bind name of required term ``index``."""
    return f"t{index}"


def phrase_bind(index: int) -> str:
    """Bind name of phrase ``index``."""
    return f"tp{index}"


def excluded_bind(index: int) -> str:
    """Bind name of excluded term ``index``."""
    return f"tx{index}"


class _Identifier(ColumnElement[Any]):
    """A configured table name or column list, quoted by the dialect when compiled."""

    inherit_cache = True
    _traverse_internals = [  # noqa: RUF012 - SQLAlchemy declares it an instance list
        ("names", InternalTraversal.dp_plain_obj),
        ("schema", InternalTraversal.dp_plain_obj),
        ("as_list", InternalTraversal.dp_plain_obj),
    ]

    def __init__(self, names: tuple[str, ...], *, schema: str | None, as_list: bool) -> None:
        self.names = names
        self.schema = schema
        self.as_list = as_list


@compiles(_Identifier)
def _compile_identifier(element: _Identifier, compiler: SQLCompiler, **_kw: Any) -> str:
    preparer = compiler.preparer
    if element.as_list:
        return "(" + ", ".join(preparer.quote(name) for name in element.names) + ")"
    table = sa.table(element.names[0], schema=schema_identifier(element.schema, preparer))
    return preparer.format_table(table)


class SqlServerFullText:
    """The SQL Server strategy for ``esra.sql.StatementBuilder`` (use the ``mssql`` dialect).

    The mapping's relation needs a full-text index covering its searchable columns (title and
    content fields when none is marked) with the record key as its ``KEY INDEX``;
    ``esra.sqlserver.fulltext_index_statements`` writes the DDL. ``Mapping.text_index`` names
    the full-text catalog and is not needed in the query itself.
    """

    name = "sqlserver-fulltext"
    base_columns: tuple[str, ...] = ()

    def clause(self, target: TextTarget, shape: TermShape) -> FullTextClause:
        """Join one ranked full-text function per required term and phrase, one for the
        optional terms, and exclude by ``NOT EXISTS``; score with the summed ``RANK``."""
        base: Any = target.base
        zero = sa.literal_column("0", sa.Integer)
        if not shape.positive and not shape.excluded:
            return FullTextClause(from_clause=base, predicate=None, score=zero)
        relation = _Identifier((base.element.name,), schema=target.schema, as_list=False)
        columns = _Identifier(tuple(c.name for c in target.searchable), schema=None, as_list=True)

        def ranked(function: str, bind: str, alias: str) -> Any:
            call = getattr(sa.func, function)(relation, columns, sa.bindparam(bind))
            return call.table_valued(KEY_COLUMN, RANK_COLUMN).alias(alias)

        from_clause: Any = base
        ranks: list[ColumnElement[Any]] = []
        musts = [(required_bind(i), f"ftr{i}") for i in range(shape.required)]
        musts += [(phrase_bind(i), f"ftp{i}") for i in range(shape.phrases)]
        for bind, alias in musts:
            table = ranked("CONTAINSTABLE", bind, alias)
            from_clause = from_clause.join(table, table.c[KEY_COLUMN] == target.key)
            ranks.append(table.c[RANK_COLUMN])
        if shape.optional:
            table = ranked("FREETEXTTABLE", OPTIONAL_BIND, "fto")
            on = table.c[KEY_COLUMN] == target.key
            if musts:
                from_clause = from_clause.outerjoin(table, on)
                ranks.append(sa.func.coalesce(table.c[RANK_COLUMN], zero))
            else:
                from_clause = from_clause.join(table, on)
                ranks.append(table.c[RANK_COLUMN])
        conditions: list[ColumnElement[bool]] = []
        for i in range(shape.excluded):
            table = ranked("CONTAINSTABLE", excluded_bind(i), f"ftx{i}")
            hit: Any = sa.select(sa.literal_column("1")).select_from(table)
            conditions.append(~sa.exists(hit.where(table.c[KEY_COLUMN] == target.key)))
        score: ColumnElement[Any] = zero
        if ranks:
            score = functools.reduce(lambda left, right: left + right, ranks)
        predicate = sa.and_(*conditions) if conditions else None
        return FullTextClause(from_clause=from_clause, predicate=predicate, score=score)

    def bind_values(self, terms: SearchTerms) -> dict[str, object]:
        """Return each term's value: quoted phrases for CONTAINSTABLE, words for FREETEXT."""
        values: dict[str, object] = {}
        for i, term in enumerate(terms.required):
            values[required_bind(i)] = containstable_phrase(term)
        for i, phrase in enumerate(terms.phrases):
            values[phrase_bind(i)] = containstable_phrase(phrase)
        if terms.optional:
            values[OPTIONAL_BIND] = freetext_string(terms.optional)
        for i, term in enumerate(terms.excluded):
            values[excluded_bind(i)] = containstable_phrase(term)
        return values
