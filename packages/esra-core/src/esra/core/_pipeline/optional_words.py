"""Optional terms are words: an optional term of several words counts each word on its own.

A plan's optional terms are alternatives: evidence of relevance, any of which may match. A
planner that writes one as several words ("heat transfer") means those words, not that
exact sequence — a sequence that must occur is what a phrase says, and phrases are
required. The engines read such a term differently: SQLite and PostgreSQL as a token
sequence (as they read a required term), MariaDB's natural-language ``MATCH`` as any of its
words, weighed against each other by InnoDB's index-wide statistics. So the same plan found
far fewer records on SQLite and PostgreSQL than on MariaDB (``docs/benchmarks.md``), and on
MariaDB the words of rows a caller's record conditions hide could reorder what it sees.

Splitting every optional term into its words before any provider sees the query makes every
engine score each word as a term of its own, with its own statistics. Whitespace is the one
boundary every engine's tokenizer shares; what lies between (``e-bike``, ``c++``) stays one
term for the engine to tokenize as it always did. A word already present (case folded, as
every engine's full-text matching folds it) is kept once: a word is evidence once, and a
repeated term would count twice in the sum of a BM25 score.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["optional_words"]


def optional_words(terms: Iterable[str]) -> tuple[str, ...]:
    """Return the words of ``terms`` in order, each case-folded word once.

    Idempotent: the words of words are themselves.
    """
    seen: set[str] = set()
    words: list[str] = []
    for term in terms:
        for word in term.split():
            folded = word.casefold()
            if folded not in seen:
                seen.add(folded)
                words.append(word)
    return tuple(words)
