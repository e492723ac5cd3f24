"""SQLite states how many terms one statement scores, and SQLite agrees.

A query with record conditions is scored term by term (``esra.sqlite._fulltext``): the
statement joins the relation, the FTS table, a statistics row and one match per term, and
SQLite joins at most 64 tables. The provider states the bound for every caller alike as
``max_scored_terms``; the validator refuses a query over it as ``TERM_LIMIT_EXCEEDED``
(``tests/core/test_validation_stated_limits.py``). Before, such a query failed as
``UNKNOWN`` for a caller with record conditions only.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from esra.core.codes import ProviderErrorCode
from esra.core.exceptions import ProviderError
from esra.sqlite import SqliteFts5Provider
from esra.sqlite._fulltext import MAX_SCORED_TERMS
from tests._bm25_corpus import (
    HIDDEN,
    MAPPING,
    MINE,
    OWNED_COLUMNS,
    owned_rows,
    scored_query,
)
from tests.sqlite.conftest import run_query, seed_database


def test_the_provider_states_the_most_terms_a_caller_scored_statement_joins(
    tmp_path: Path,
) -> None:
    path = seed_database(tmp_path / "ranked.db", MAPPING, OWNED_COLUMNS, owned_rows(HIDDEN))
    provider = SqliteFts5Provider(path, mappings=(MAPPING,))
    try:
        assert provider.capabilities.max_scored_terms == MAX_SCORED_TERMS
        most = scored_query(MAX_SCORED_TERMS, MINE)
        assert run_query(provider, most)
        with pytest.raises(ProviderError) as refused:
            run_query(provider, scored_query(MAX_SCORED_TERMS + 1, MINE))
    finally:
        provider.close()
    # "at most 64 tables in a join": the statement's own limit, so the query's fault, never
    # counted against the source's breaker (UNKNOWN was).
    assert refused.value.code is ProviderErrorCode.SYNTAX_ERROR
