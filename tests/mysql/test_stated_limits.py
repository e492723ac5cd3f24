"""MySQL / MariaDB state how many terms one statement scores, and the server agrees.

Each scored term (required term, optional word, phrase) is one derived table in the join of
the statement's BM25 statistics (``esra.mysql._bm25``), and the server joins at most 61
tables. The provider states that bound as ``max_scored_terms``; the validator refuses a query
over it as ``TERM_LIMIT_EXCEEDED`` (``tests/core/test_validation_stated_limits.py``). Before,
an administrator who raised ``max_terms_per_query`` past it got the server's error 1116 as
``UNKNOWN``.
"""

from __future__ import annotations

import pytest

from esra.core.codes import ProviderErrorCode
from esra.core.exceptions import ProviderError
from esra.mysql._bm25 import MAX_SCORED_TERMS
from tests._bm25_corpus import HIDDEN, MAPPING, MINE, OWNED_COLUMNS, owned_rows, scored_query
from tests.mysql.conftest import (
    Server,
    close_now,
    create_database,
    drop_database,
    run_query,
    seed_table,
)

pytestmark = [pytest.mark.mysql, pytest.mark.integration]


def test_the_provider_states_the_most_terms_the_server_scores(server: Server) -> None:
    """A statement of exactly the stated number of scored terms runs and finds rows; one
    more is refused by the server, classified as a statement no retry mends."""
    name = create_database(server)
    try:
        seed_table(server, name, MAPPING, OWNED_COLUMNS, owned_rows(HIDDEN))
        provider = server.provider(name, mappings=(MAPPING,))
        try:
            assert provider.capabilities.max_scored_terms == MAX_SCORED_TERMS
            assert run_query(provider, scored_query(MAX_SCORED_TERMS, MINE))
            with pytest.raises(ProviderError) as refused:
                run_query(provider, scored_query(MAX_SCORED_TERMS + 1, MINE))
        finally:
            close_now(provider)
    finally:
        drop_database(server, name)
    assert refused.value.code is ProviderErrorCode.SYNTAX_ERROR
