"""MySQL / MariaDB FULLTEXT as a ``FullTextDialect``: natural-language MATCH plus literal LIKE.

User text is only ever a bound parameter. Every ``MATCH(cols) AGAINST (... IN NATURAL LANGUAGE
MODE)`` gets a bind value reduced to word characters and spaces: ``"`` (a phrase in
natural-language mode) is removed, and so is every other punctuation character, because
InnoDB parses natural-language queries with its boolean grammar too — observed on MariaDB
10.11, a lone ``*`` is error 1064. InnoDB splits tokens on those characters anyway, so no
token changes. BOOLEAN MODE, whose ``+ - > < ( ) ~ * " @`` are operators, and query expansion
are never used.

Natural-language mode ORs words, ignores words shorter than ``innodb_ft_min_token_size``
(3 on MariaDB and MySQL by default), longer than ``innodb_ft_max_token_size`` and stopwords
(36 by default), and does not stem. So MATCH alone cannot enforce "this term must be present",
and cannot see ``AI`` or ``c++`` at all. The semantics therefore are (``cols`` are the
mapping's searchable columns, in configuration order):

- **required term / phrase**: the term's text must occur in one of the columns, as a
  case-insensitive (per the column's collation) *substring* with whitespace collapsed —
  ``COALESCE(col, '') LIKE '%<term>%' ESCAPE '!'`` with ``! % _`` escaped. When the term has
  at least one indexable token, ``MATCH(cols) AGAINST(<term>)`` is also required (it lets the
  server use the FULLTEXT index and guarantees a whole indexed token is present). When it has
  none (``AI``, ``c++``, ``the``), a bound flag switches that MATCH off — the LIKE still
  enforces the term: a required term is never dropped. A multi-word required term therefore
  behaves as a phrase. Substring matching can over-match a short term inside a longer word
  (``AI`` in ``maintain``); it never under-matches text written as the term is written.
- **optional terms**: without required terms or phrases, a row must match at least one:
  ``MATCH(cols) AGAINST(<all optional terms>)`` or, for each optional term without an
  indexable token, its LIKE (the LIKE pattern is bound ``NULL`` — never true — for terms MATCH
  can see). With required terms or phrases they only raise the score.
- **excluded term**: no column may contain it as a substring (``NOT (... LIKE ...)``). This is
  a superset of MATCH's token-level exclusion: anything MATCH would exclude is excluded, and
  so are words containing the term — the conservative direction.
- **score**: BM25 over every required, optional and phrase term, computed in the statement
  from each term's own ``MATCH`` relevance (``esra.mysql._bm25``), higher is better; ``0``
  for a query without positive terms. A term MATCH cannot see adds nothing to it; a term
  of several indexable tokens counts one occurrence where it matches.

Which tokens are indexable is decided per execution from ``TokenRules`` that the provider
reads from the server at first connect (token sizes and the stopword list in effect).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

import attrs
import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from sqlalchemy.sql.expression import ColumnElement

from esra.mysql._bm25 import ScoredTerm, bm25_score, counted_bind, first_word_bind
from esra.sql import FullTextClause, SearchTerms, TermShape, TextTarget

__all__ = [
    "ANY_OPTIONAL_BIND",
    "DEFAULT_STOPWORDS",
    "LIKE_ESCAPE",
    "MatchAgainstFullText",
    "TokenRules",
    "indexable_tokens",
    "like_pattern",
    "match_string",
]

# Every optional term in one natural-language MATCH: the predicate of a query whose terms are
# all optional (a row must contain at least one).
ANY_OPTIONAL_BIND = "q"
LIKE_ESCAPE = "!"

# InnoDB's default stopword list (INFORMATION_SCHEMA.INNODB_FT_DEFAULT_STOPWORD), identical on
# MariaDB 10.6+ and MySQL 8; used when the server's own list cannot be read.
_DEFAULT_STOPWORDS_TEXT = (
    "a about an are as at be by com de en for from how i in is it la of on or that the this "
    "to was what when where who will with und www"
)
DEFAULT_STOPWORDS: frozenset[str] = frozenset(_DEFAULT_STOPWORDS_TEXT.split(" "))

_WORD = re.compile(r"\w+")
_NON_WORD = re.compile(r"[^\w]+")
_SPACE = re.compile(r"\s+")


@attrs.frozen
class TokenRules:
    """What the server's InnoDB full-text parser indexes: token sizes and stopwords."""

    min_token: int = 3
    max_token: int = 84
    stopwords: frozenset[str] = DEFAULT_STOPWORDS


def match_string(term: str) -> str:
    """Return ``term`` as a natural-language AGAINST value: word characters and spaces only.

    ``"`` must go (it makes a phrase), and InnoDB parses even natural-language queries with
    its boolean grammar: a lone ``*`` is a syntax error (1064). InnoDB's tokenizer treats every
    character but letters, digits and ``_`` as a separator, so turning each run of other
    characters into one space changes no token and leaves the parser nothing but words.
    """
    return _NON_WORD.sub(" ", term).strip()


def indexable_tokens(term: str, rules: TokenRules) -> tuple[str, ...]:
    """Return the tokens of ``term`` a FULLTEXT index under ``rules`` can match."""
    return tuple(
        token
        for token in _WORD.findall(match_string(term).lower())
        if rules.min_token <= len(token) <= rules.max_token and token not in rules.stopwords
    )


def like_pattern(term: str) -> str:
    """Return ``%<term>%`` for ``LIKE ... ESCAPE '!'``: ``! % _`` escaped, whitespace collapsed."""
    text = _SPACE.sub(" ", term).strip()
    escaped = text.replace("!", "!!").replace("%", "!%").replace("_", "!_")
    return f"%{escaped}%"


def _names(prefix: str, count: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(count)]


def _term_match(columns: Sequence[ColumnElement[Any]], bind: str) -> ColumnElement[Any]:
    """The natural-language relevance over ``columns`` of the term bound as ``bind``."""
    return mysql.match(*columns, against=sa.bindparam(bind)).in_natural_language_mode()


def _contains(columns: Sequence[ColumnElement[Any]], bind: str) -> ColumnElement[bool]:
    """Whether one of ``columns`` holds the ``LIKE`` pattern bound as ``bind``."""
    pattern: sa.BindParameter[Any] = sa.bindparam(bind)
    return sa.or_(
        *(
            sa.func.coalesce(c, sa.literal_column("''")).like(pattern, escape=LIKE_ESCAPE)
            for c in columns
        )
    )


def _scored_terms(shape: TermShape) -> list[ScoredTerm]:
    """The scored terms of ``shape``, bound ``tb0``, ``tb1``, ... in the order required,
    optional, phrases; a required term or phrase with the ``LIKE`` that holds it."""
    held_by = [
        *(f"{name}l" for name in _names("tr", shape.required)),
        *(None for _ in range(shape.optional)),
        *(f"{name}l" for name in _names("tp", shape.phrases)),
    ]
    names = _names("tb", shape.positive)
    return [ScoredTerm(name, held) for name, held in zip(names, held_by, strict=True)]


class MatchAgainstFullText:
    """The MySQL / MariaDB strategy for ``esra.sql.StatementBuilder``.

    The searchable columns must carry one FULLTEXT index over exactly that column list, in
    that order (``esra.mysql.create_fulltext_index`` creates it); otherwise the server
    answers error 1191, classified ``COLUMN_NOT_INDEXED`` / ``TEXT_INDEX_UNAVAILABLE``.

    Args:
        rules: the server's token rules; the defaults are InnoDB's.
    """

    name = "mysql-match-natural"
    base_columns: tuple[str, ...] = ()

    def __init__(self, rules: TokenRules | None = None) -> None:
        self.rules = rules if rules is not None else TokenRules()

    def clause(self, target: TextTarget, shape: TermShape) -> FullTextClause:
        """Build the predicate and score for ``shape`` from bind parameters only."""
        base: Any = target.base
        cols = target.searchable

        def match(bind: str) -> ColumnElement[Any]:
            return _term_match(cols, bind)

        def contains(bind: str) -> ColumnElement[bool]:
            return _contains(cols, bind)

        conditions: list[ColumnElement[bool]] = []
        for prefix, count in (("tr", shape.required), ("tp", shape.phrases)):
            for name in _names(prefix, count):
                flag = sa.bindparam(f"{name}x", type_=sa.Integer)
                conditions.append(sa.or_(match(name), flag))
                conditions.append(contains(f"{name}l"))
        if shape.optional and not (shape.required or shape.phrases):
            conditions.append(
                sa.or_(
                    match(ANY_OPTIONAL_BIND),
                    *(contains(f"{n}l") for n in _names("to", shape.optional)),
                )
            )
        conditions.extend(sa.not_(contains(f"{n}l")) for n in _names("te", shape.excluded))
        predicate = sa.and_(*conditions) if conditions else None
        if not shape.positive:
            score = sa.literal_column("0.0", sa.Float)
            return FullTextClause(from_clause=base, predicate=predicate, score=score)
        bm25 = bm25_score(target, _term_match, _contains, _scored_terms(shape))
        return FullTextClause(from_clause=bm25.joined(base), predicate=predicate, score=bm25.score)

    def bind_values(self, terms: SearchTerms) -> dict[str, object]:
        """Return every bind value ``clause`` created for ``terms.shape``."""
        values: dict[str, object] = {}
        positive = (*terms.required, *terms.optional, *terms.phrases)
        # Each term's indexable tokens, read once: every positive term needs them, and
        # required terms, phrases and lone optional terms again below.
        tokens = {term: indexable_tokens(term, self.rules) for term in positive}
        if terms.optional and not (terms.required or terms.phrases):
            values[ANY_OPTIONAL_BIND] = " ".join(match_string(t) for t in terms.optional)
        for name, term in zip(_names("tb", len(positive)), positive, strict=True):
            values[name] = match_string(term)
            words = tokens[term]
            values[counted_bind(name)] = 1 if len(words) <= 1 else 0
            values[first_word_bind(name)] = words[0] if len(words) > 1 else ""
        for prefix, group in (("tr", terms.required), ("tp", terms.phrases)):
            for name, term in zip(_names(prefix, len(group)), group, strict=True):
                values[name] = match_string(term)
                values[f"{name}x"] = 0 if tokens[term] else 1
                values[f"{name}l"] = like_pattern(term)
        if terms.optional and not (terms.required or terms.phrases):
            for name, term in zip(_names("to", len(terms.optional)), terms.optional, strict=True):
                # NULL never matches: MATCH already sees the term.
                values[f"{name}l"] = None if tokens[term] else like_pattern(term)
        for name, term in zip(_names("te", len(terms.excluded)), terms.excluded, strict=True):
            values[f"{name}l"] = like_pattern(term)
        return values


def stopwords_from(rows: Iterable[tuple[object, ...]]) -> frozenset[str]:
    """Return a stopword set from ``SELECT value ...`` rows (lower-cased, blanks dropped)."""
    return frozenset(str(row[0]).lower() for row in rows if row and row[0])
