"""PostgreSQL states how many terms one statement scores, and the server agrees.

The BM25 statistics row of a statement (``esra.postgres._bm25``) holds three columns per
term, and a target list at most 1,664 entries. The provider states the bound as
``max_scored_terms``; the validator refuses a query over it as ``TERM_LIMIT_EXCEEDED``
(``tests/core/test_validation_stated_limits.py``). Before, some hundreds of terms already
failed as ``UNKNOWN``: the terms' tsqueries, scores and statistics were chained one after the
other, deeper than SQLAlchemy can walk (``RecursionError``); they are combined pairwise now
(``esra.sql.combine_pairwise``).
"""

from __future__ import annotations

import pytest

from esra.core.codes import ProviderErrorCode
from esra.core.exceptions import ProviderError
from esra.postgres._bm25 import MAX_SCORED_TERMS
from tests._bm25_corpus import (
    HIDDEN,
    MAPPING,
    MINE,
    OWNED_COLUMNS,
    owned_rows,
    scored_query,
)
from tests.postgres.conftest import make_provider, seed_table

pytestmark = [pytest.mark.postgres, pytest.mark.integration]


async def test_the_provider_states_the_most_terms_the_server_scores(
    pg_dsn: str, pg_schema: str
) -> None:
    seed_table(pg_dsn, pg_schema, MAPPING, OWNED_COLUMNS, owned_rows(HIDDEN))
    provider = make_provider(pg_dsn, pg_schema, mappings=(MAPPING,))
    try:
        assert provider.capabilities.max_scored_terms == MAX_SCORED_TERMS
        most = scored_query(MAX_SCORED_TERMS, MINE)
        assert await provider.execute(most, timeout_s=30)
        one_more = scored_query(MAX_SCORED_TERMS + 1, MINE)
        with pytest.raises(ProviderError) as refused:
            await provider.execute(one_more, timeout_s=30)
    finally:
        await provider.close()
    # 54011 too_many_columns: the statement's own limit, so the query's fault, never retried
    # and never counted against the source's breaker.
    assert refused.value.code is ProviderErrorCode.SYNTAX_ERROR
