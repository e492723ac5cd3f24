"""Oracle states how long an Oracle Text expression may be, and the validator holds plans to it.

Every term of a query travels in ONE bind, the CONTAINS expression (``esra.oracle._fulltext``),
which braces every token and joins terms with operators, so it grows with the terms: with the
default policy (48 terms of 200 characters) a plan of CJK terms made an expression of tens of
kilobytes. A CONTAINS query is a VARCHAR2, and in SQL a VARCHAR2 holds 4,000 bytes under the
default ``MAX_STRING_SIZE = STANDARD``. No Oracle runs here, so which error an over-long bind
draws is not observed; what is checked is that the validator refuses, before anything is sent,
every query whose expression is over 4,000 bytes — counted in UTF-8, which no database
character set needs more bytes than for the characters it can hold — and admits the rest.
Refused, it is TERM_LIMIT_EXCEEDED; sent, whatever error came back could be counted against
the source's breaker.
"""

from __future__ import annotations

from esra.core.ports import ProviderCapabilities
from esra.oracle._fulltext import oracle_text_expression
from esra.sql import SearchTerms
from tests.core._validation_fixtures import World, keyword, make_world
from tests.oracle.conftest import provider


def _world(caps: ProviderCapabilities | None = None) -> World:
    stated = caps or provider().capabilities
    return make_world(capabilities={"s-1": stated, "s-2": stated, "s-3": stated})


def _expression_bytes(required: tuple[str, ...]) -> int:
    return len(oracle_text_expression(SearchTerms(required=required)).encode())


def test_the_provider_states_its_text_query_limit_in_bytes() -> None:
    caps = provider().capabilities
    assert caps.rendering is not None
    assert caps.max_text_condition_length == 4000


def test_an_expression_over_4000_bytes_is_refused_before_execution() -> None:
    """Fourteen 100-character CJK terms are within the default policy, and 4,200 bytes of
    text: braced and joined, their expression is over 4,000 bytes."""
    terms = tuple(chr(0x4E00 + i) * 100 for i in range(14))
    assert _expression_bytes(terms) > 4000
    outcome = _world().validate([keyword(required_terms=terms, optional_terms=())])
    assert outcome.queries == ()


def test_the_measure_admits_exactly_the_expressions_that_fit() -> None:
    """Term counts are admitted up to the last whose expression fits, and no further."""
    world = _world()
    term = "\u00e9" * 150  # 300 bytes, 150 characters: within the default term length
    admitted = [
        n
        for n in range(1, 20)
        if world.validate([keyword(required_terms=(term,) * n, optional_terms=())]).queries
    ]
    most = admitted[-1]
    assert admitted == list(range(1, most + 1))
    assert _expression_bytes((term,) * most) <= 4000 < _expression_bytes((term,) * (most + 1))


def test_ordinary_queries_are_measured_and_admitted() -> None:
    """A plain keyword plan is far inside the limit."""
    planned = keyword(required_terms=("solar", "AND", "{x}}"), optional_terms=("a b c",))
    (query,) = _world().validate([planned]).queries
    rendering = provider().capabilities.rendering
    assert rendering is not None
    lengths = rendering.rendered_lengths(query)
    assert lengths is not None
    terms = SearchTerms(
        required=query.required_terms, optional=query.optional_terms, phrases=query.phrases
    )
    assert lengths.text_conditions == (len(oracle_text_expression(terms).encode()),)
