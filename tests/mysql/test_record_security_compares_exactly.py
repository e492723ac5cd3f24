"""Record-level security on a live MariaDB, where the column's collation decides equality.

Found by a hostile review:

1. A record filter or template placeholder compared the claim with the column under the
   column's collation. MariaDB's default ``*_ci`` collations are case-, accent- and
   width-insensitive and PAD SPACE, so a claim ``EMEA``, ``émea``, ``emea `` or ``ｅｍｅａ``
   matched rows of ``emea`` — rows PostgreSQL and SQLite never return for that claim — and a
   claim of one space matched the rows whose field is empty. Text is compared under
   ``utf8mb4_bin`` now, and a whitespace-padded claim is refused on every engine.

2. A multi-word term's BM25 weighs its words by InnoDB's index-wide idf (hidden rows
   included), so the words of rows the caller's record conditions hide reorder the rows it
   may see. Closed for optional terms, which the validator issues as single words
   (``esra.core._pipeline.optional_words``), each with its own counted statistics, and
   whose occurrences are read back rounded: unrounded, the single-precision relevance
   InnoDB returns still decided an exact tie by its index-wide idf. Then closed for a term
   of several indexed words (a required term, a phrase, an optional ``heat-transfer``):
   its match counts one occurrence, its ``df`` is counted over the visible rows that hold
   it, and InnoDB's ``N`` is read back from one of its words alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from collections.abc import Mapping as MappingABC

import pytest

from esra.core._config.mapping import FieldSpec, FieldType, Mapping, RecordFilter
from esra.core._context import ClaimValue
from esra.core._pipeline.optional_words import optional_words
from esra.mysql import MySqlProvider
from tests._bm25_corpus import MAPPING as BM25_MAPPING
from tests._bm25_corpus import MINE, OWNED_COLUMNS, ranked_query
from tests._record_templates import query_for
from tests.mysql.conftest import (
    Server,
    close_now,
    create_database,
    drop_database,
    run_query,
    seed_table,
)

pytestmark = [pytest.mark.mysql, pytest.mark.integration]

TENANT = "t-contract"

# Structured record filter: region = {claim region}.
FILTERED = Mapping(
    id="rs-docs",
    tenant_id=TENANT,
    source_id="src-rs",
    business_name="Regional notes",
    description="Notes guarded by a structured record filter.",
    relation="rs_docs",
    record_key="doc_key",
    title_field="title",
    content_fields=("body",),
    fields=(
        FieldSpec("title", "doc_title", is_searchable=True, is_returnable=True),
        FieldSpec("body", "doc_body", is_searchable=True, is_returnable=True),
        FieldSpec("region", "doc_region", is_restricted=True),
    ),
    text_index="rs_docs_fts",
    record_filters=(RecordFilter("region", "region"),),
)
# The same table guarded by a template instead.
TEMPLATED = Mapping(
    id="rs-docs",
    tenant_id=TENANT,
    source_id="src-rs",
    business_name="Regional notes",
    description="Notes guarded by a record-filter template.",
    relation="rs_docs",
    record_key="doc_key",
    title_field="title",
    content_fields=("body",),
    fields=FILTERED.fields,
    text_index="rs_docs_fts",
    record_filter_template="region = {claim:region}",
)
COLUMNS = (
    ("doc_key", FieldType.TEXT),
    ("doc_title", FieldType.TEXT),
    ("doc_body", FieldType.TEXT),
    ("doc_region", FieldType.TEXT),
)
ROWS = tuple(
    {"doc_key": key, "doc_title": f"Quarterly report {title}", "doc_body": "report",
     "doc_region": region}
    # k-unassigned: not yet assigned a region, so no caller's region claim names it.
    for key, title, region in (
        ("k-emea", "emea", "emea"), ("k-apac", "apac", "apac"), ("k-unassigned", "draft", "")
    )
)  # fmt: skip


def _visible(
    provider: MySqlProvider, mapping: Mapping, claims: MappingABC[str, ClaimValue]
) -> frozenset[str]:
    query = query_for(provider, claims, mapping=mapping, term="report")
    if query is None:
        return frozenset()
    return frozenset(row.key for row in run_query(provider, query))


@pytest.fixture(scope="module")
def seeded(server: Server) -> Iterator[str]:
    """A database in MariaDB's usual ``utf8mb4_unicode_ci`` collation (what the suite uses)."""
    name = create_database(server)
    seed_table(server, name, FILTERED, COLUMNS, ROWS)
    yield name
    drop_database(server, name)


@pytest.fixture(params=["record_filters", "template"])
def guarded(
    request: pytest.FixtureRequest, server: Server, seeded: str
) -> Iterator[tuple[MySqlProvider, Mapping]]:
    mapping = FILTERED if request.param == "record_filters" else TEMPLATED
    provider = server.provider(seeded, mappings=(mapping,))
    yield provider, mapping
    close_now(provider)


def test_control_the_exact_claim_sees_its_rows(guarded: tuple[MySqlProvider, Mapping]) -> None:
    provider, mapping = guarded
    assert _visible(provider, mapping, {"region": "emea"}) == {"k-emea"}


@pytest.mark.parametrize(
    "claim",
    ["EMEA", "Emea", "emea ", "émea", "ｅｍｅａ"],
    ids=["upper", "title", "trailing-space", "accent", "fullwidth"],
)
def test_a_claim_naming_another_value_sees_no_row(
    guarded: tuple[MySqlProvider, Mapping], claim: str
) -> None:
    """No row's region is ``claim``: PostgreSQL, SQLite and the in-memory provider return
    nothing; MariaDB's collation folds case, accents, width and trailing spaces and returns
    the ``emea`` row."""
    provider, mapping = guarded
    assert _visible(provider, mapping, {"region": claim}) == frozenset()


def test_a_blank_claim_never_serves_the_rows_whose_field_is_empty(
    guarded: tuple[MySqlProvider, Mapping],
) -> None:
    """An empty claim is refused so it cannot serve empty-field rows (docs/security.md). A
    claim of one space is accepted by ``coerce_claim`` and, under PAD SPACE, equals ''."""
    provider, mapping = guarded
    assert _visible(provider, mapping, {"region": " "}) == frozenset()
    assert _visible(provider, mapping, {"region": ("apac", "  ")}) <= {"k-apac"}


# --- 2. BM25 of a multi-word term counts hidden rows' words --------------------------------

# Two visible rows of equal length holding the two words of one term in opposite proportions.
_VISIBLE = {
    "v1": "zorb quil zorb",
    "v2": "zorb quil quil",
    "v3": "plen krat dask",
    "v4": "frol vemt brum",
}


def _rows(hidden_word: str) -> list[dict[str, str]]:
    return [
        *({"doc_key": k, "body": b, "owner": "me"} for k, b in _VISIBLE.items()),
        *({"doc_key": f"h{n}", "body": f"{hidden_word} clet", "owner": "them"} for n in range(20)),
    ]


def _ranked(
    server: Server,
    hidden_word: str,
    *,
    optional: tuple[str, ...] = (),
    required: tuple[str, ...] = (),
    phrases: tuple[str, ...] = (),
) -> list[tuple[str, float]]:
    """The caller's rows, in order, with their scores, where the hidden rows hold
    ``hidden_word``."""
    name = create_database(server)
    try:
        seed_table(server, name, BM25_MAPPING, OWNED_COLUMNS, _rows(hidden_word))
        provider = server.provider(name, mappings=(BM25_MAPPING,))
        try:
            query = ranked_query(
                optional=optional, required=required, phrases=phrases, record_predicate=MINE
            )
            rows = run_query(provider, query)
        finally:
            close_now(provider)
    finally:
        drop_database(server, name)
    return [(row.key, row.score) for row in rows]


def _order(server: Server, hidden_word: str, **terms: tuple[str, ...]) -> list[str]:
    return [key for key, _ in _ranked(server, hidden_word, **terms)]


def test_hidden_rows_words_never_reorder_optional_words(server: Server) -> None:
    """The caller sees the same two rows in both databases; only the words of the rows its
    record predicate hides differ (``zorb`` or ``quil``). Its order must not move for the
    optional terms the validator issues for a planned ``zorb quil``."""
    words = optional_words(["zorb quil"])
    assert words == ("zorb", "quil")
    behind_zorb = _order(server, "zorb", optional=words)
    behind_quil = _order(server, "quil", optional=words)
    assert set(behind_zorb) == set(behind_quil) == {"v1", "v2"}
    assert behind_zorb == behind_quil


@pytest.mark.parametrize(
    ("group", "term"),
    [
        ("required", "zorb quil"),
        ("phrases", "zorb quil"),
        # One word to the validator (``optional_words`` splits at whitespace), two to InnoDB.
        ("optional", "zorb-quil"),
        ("optional", "zorb quil"),
    ],
)
def test_hidden_rows_words_never_reorder_a_multi_word_term(
    server: Server, group: str, term: str
) -> None:
    """As above, for the two words as one term (both rows hold it): a required term, a
    phrase, an optional term the validator keeps whole, or one issued past the validator."""
    behind_zorb = _order(server, "zorb", **{group: (term,)})
    behind_quil = _order(server, "quil", **{group: (term,)})
    assert set(behind_zorb) == set(behind_quil) == {"v1", "v2"}
    assert behind_zorb == behind_quil


def test_hidden_rows_words_never_weigh_a_multi_word_term(server: Server) -> None:
    """Beside other terms a term's weight (its idf, from ``N`` and ``df``) decides the order,
    so no visible row's score may move with the hidden rows' words either: ``N`` is read
    back from one word of the phrase, never from its combined relevance."""
    terms = {"phrases": ("zorb quil",), "optional": ("zorb", "plen")}
    behind_zorb = _ranked(server, "zorb", **terms)
    behind_quil = _ranked(server, "quil", **terms)
    assert [key for key, _ in behind_zorb] == [key for key, _ in behind_quil]
    assert [score for _, score in behind_zorb] == pytest.approx(
        [score for _, score in behind_quil], rel=1e-9
    )
