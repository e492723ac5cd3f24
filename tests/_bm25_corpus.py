"""The small corpus the engines' BM25 tests score: rows of made-up words, and their query.

Every word is four letters, no stopword, and left as it is by PostgreSQL's ``simple``
configuration and InnoDB's parser alike (one lexeme, one token per word), so a test can count
occurrences and lengths in the text and compute the score the statement should give. The
rows vary what BM25 weighs: a word's count (``zorb`` once, three and eight times), a row's
length (the ten ``FILLER`` words), and how many rows hold a word (its idf).
"""

from __future__ import annotations

from collections.abc import Sequence

from esra.core._config.mapping import FieldSpec, FieldType, Mapping, Operator
from esra.core._pipeline.values import ValidatedQuery, _issue
from esra.core._query import ProjectedField, Strategy
from esra.core._record_predicate import PredicateComparison, RecordPredicate

__all__ = [
    "BODIES",
    "FILLER",
    "HIDDEN",
    "K1",
    "MAPPING",
    "MINE",
    "OWNED_COLUMNS",
    "B",
    "owned_rows",
    "ranked_query",
]

# The parameters every engine's BM25 must use (FTS5's bm25() defaults), written here rather
# than read from esra.sql, so a change to the product's constants fails the score tests.
K1 = 1.2
B = 0.75

MAPPING = Mapping(
    id="bm25",
    tenant_id="t-contract",
    source_id="s",
    business_name="Ranked",
    description="",
    relation="bm25_docs",
    record_key="doc_key",
    title_field="body",
    content_fields=(),
    fields=(FieldSpec("body", "body", is_searchable=True, is_returnable=True),),
    text_index="bm25_fts",
)
FILLER = "brum clet drav fusk grop hent jilv kump lurt marn"
BODIES = {
    "d0": "zorb quil vemt",
    "d1": "zorb zorb zorb plen krat",
    "d2": "quil vemt vemt plen krat dask frol",
    "d3": f"zorb quil {FILLER}",
    "d4": "vemt",
    "d5": "dask frol",
    "d6": f"quil {FILLER} zorb zorb zorb zorb zorb zorb zorb zorb",
}

# The corpus beside rows of another owner that a record-filter template (``MINE``) hides, full
# of the words "zorb quil" queries ask for: counted, they would make both words common and
# shorten the average length the rows are pivoted on.
OWNED_COLUMNS = (("doc_key", FieldType.TEXT), ("body", FieldType.TEXT), ("owner", FieldType.TEXT))
MINE = PredicateComparison("owner", FieldType.TEXT, Operator.EQ, ("me",))
HIDDEN = {f"h{n}": "zorb quil zorb quil krat" for n in range(20)}


def owned_rows(hidden: dict[str, str]) -> list[dict[str, str]]:
    """``BODIES`` owned by "me" (what ``MINE`` admits), then ``hidden`` owned by "them"."""
    return [
        *({"doc_key": key, "body": body, "owner": "me"} for key, body in BODIES.items()),
        *({"doc_key": key, "body": body, "owner": "them"} for key, body in hidden.items()),
    ]


def ranked_query(
    *,
    optional: Sequence[str] = (),
    required: Sequence[str] = (),
    phrases: Sequence[str] = (),
    mapping: Mapping = MAPPING,
    record_predicate: RecordPredicate | None = None,
) -> ValidatedQuery:
    """A keyword query over ``mapping`` projecting the body, with these terms (and, when
    given, the record predicate a caller's template resolved to)."""
    return _issue(
        query_id="s#1",
        source_id="s",
        mapping=mapping,
        strategy=Strategy.KEYWORD,
        required_terms=tuple(required),
        optional_terms=tuple(optional),
        excluded_terms=(),
        phrases=tuple(phrases),
        filters=(),
        record_filters=(),
        record_predicate=record_predicate,
        projection=(ProjectedField("body", "body"),),
        freshness=None,
        row_limit=50,
    )


def scored_query(scored: int, record_predicate: RecordPredicate | None = None) -> ValidatedQuery:
    """A ``ranked_query`` of ``scored`` (at least 3) terms of every scored kind: one required
    term and one phrase that rows hold, one optional word they hold and optional words that
    none does."""
    optional = ("quil", *(f"absent{i}" for i in range(scored - 3)))
    return ranked_query(
        required=("zorb",), optional=optional, phrases=("zorb",), record_predicate=record_predicate
    )
