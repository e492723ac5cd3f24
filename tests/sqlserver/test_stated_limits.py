"""SQL Server states its limits, and the validator refuses what the engine could not run.

A full-text search condition is ``nvarchar`` (never ``max``): 4,000 UTF-16 code units; the
statement and its parameter definition each travel as one RPC character parameter: 4,000
units as well. The validator measures a plan with the provider's own builder and RPC
composition, so what it issues is exactly what ``rpc_statement`` accepts. No server runs
here: every claim is checked on the statement execution would send.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from esra.core._query import PlannedQuery
from esra.core.codes import RejectionReason
from esra.core.config import CapabilityLimits
from esra.core.ports import ProviderCapabilities
from esra.core.providers import ValidatedQuery
from esra.sqlserver._fulltext import containstable_phrase, renders_empty
from esra.sqlserver._provider import bindable
from esra.sqlserver._rpc import RpcLimitError, RpcStatement, rpc_statement, utf16_units
from tests.core._validation_fixtures import ALL_CAPS, World, keyword, make_world
from tests.sqlserver.conftest import provider, uncached_builder


def _world(caps: ProviderCapabilities | None = None) -> World:
    stated = caps or provider().capabilities
    return make_world(capabilities={"s-1": stated, "s-2": stated, "s-3": stated})


def _sent(query: ValidatedQuery) -> RpcStatement:
    """The ``sp_executesql`` call execution would send (``RpcLimitError`` if it could not)."""
    built = uncached_builder().build(query)
    return rpc_statement(built.sql, {k: bindable(v) for k, v in built.params.items()})


def _words(n: int) -> tuple[str, ...]:
    return tuple(f"w{i}" for i in range(n))


def test_the_provider_states_its_limits_in_utf16_code_units() -> None:
    caps = provider().capabilities
    assert caps.rendering is not None
    assert caps.max_text_condition_length == 4000
    assert caps.max_command_length == 4000


def test_the_stated_measure_is_what_execution_sends() -> None:
    """The lengths the validator compares are those of the RPC call itself."""
    planned = keyword(
        required_terms=("solar", 'say "hi"'), optional_terms=("é 中文 🙂", "x*"), phrases=("a b",)
    )
    (query,) = _world().validate([planned]).queries
    rendering = provider().capabilities.rendering
    assert rendering is not None
    lengths = rendering.rendered_lengths(query)
    sent = _sent(query)
    assert lengths is not None
    assert lengths.command == max(utf16_units(sent.text), utf16_units(sent.definition))
    bound = {p.name[1:]: p.value for p in sent.parameters}
    conditions = [bound[name] for name in ("t0", "t1", "tp0", "q")]
    assert lengths.text_conditions == tuple(utf16_units(str(v)) for v in conditions)


def test_required_terms_beyond_what_the_statement_can_hold_are_refused_by_the_validator() -> None:
    """Every required term adds a CONTAINSTABLE join to the statement. The validator admits
    exactly the term counts whose statement can be sent: before, it admitted 32 short terms
    and the provider refused the 4,042-unit statement at run time (``SYNTAX_ERROR``)."""
    world = _world()
    admitted = [
        n for n in range(1, 41) if world.validate([keyword(required_terms=_words(n))]).queries
    ]
    most = admitted[-1]
    assert admitted == list(range(1, most + 1))
    assert most < 32
    (fits,) = world.validate([keyword(required_terms=_words(most))]).queries
    _sent(fits)
    one_more = keyword(required_terms=_words(most + 1))
    assert [r.reason for r in world.validate([one_more]).rejections] == [
        RejectionReason.TERM_LIMIT_EXCEEDED
    ]
    (unlimited,) = _world(ALL_CAPS).validate([one_more]).queries
    with pytest.raises(RpcLimitError, match="the statement"):
        _sent(unlimited)


def test_the_freetext_string_is_held_to_4000_units_inclusive() -> None:
    """20 optional terms of the default 200-character maximum join to 4,019 characters.
    Each term is a different word: the validator keeps a repeated one once."""
    exactly = (*(letter * 199 for letter in "abcdefghijklmnopqrs"), "z" * 200)  # 3,981 + 19
    (query,) = _world().validate([keyword(optional_terms=exactly)]).queries
    (freetext,) = [p.value for p in _sent(query).parameters if p.name == "@q"]
    assert utf16_units(str(freetext)) == 4000
    over = (*(letter * 199 for letter in "abcdefghijklmnopqr"), "y" * 200, "z" * 200)
    assert [r.reason for r in _world().validate([keyword(optional_terms=over)]).rejections] == [
        RejectionReason.TERM_LIMIT_EXCEEDED
    ]
    (unlimited,) = _world(ALL_CAPS).validate([keyword(optional_terms=over)]).queries
    with pytest.raises(RpcLimitError, match="@q"):
        _sent(unlimited)


def test_length_counts_utf16_code_units_and_the_rendered_text() -> None:
    """A character outside the BMP is two units; a removed ``"`` is none."""
    astral = tuple(chr(0x1F600 + n) * 100 for n in range(20))  # 2,019 characters, 4,019 units
    assert [r.reason for r in _world().validate([keyword(optional_terms=astral)]).rejections] == [
        RejectionReason.TERM_LIMIT_EXCEEDED
    ]
    quoted = tuple('"' * 100 + chr(ord("a") + n) * 100 for n in range(20))  # 4,019, 2,019 sent
    (query,) = _world().validate([keyword(optional_terms=quoted)]).queries
    _sent(query)


def test_an_optional_term_of_quotes_is_dropped_not_bound_empty() -> None:
    """FREETEXTTABLE with an empty string is error 7645; the term is simply not sent."""
    (query,) = _world().validate([keyword(optional_terms=('"', "solar", '" "'))]).queries
    built = uncached_builder().build(query)
    assert built.params["q"] == "solar"


def test_an_excluded_term_that_renders_to_nothing_is_dropped() -> None:
    planned = keyword(optional_terms=("solar",), excluded_terms=('"*"', "wind"))
    (query,) = _world().validate([planned]).queries
    built = uncached_builder().build(query)
    assert built.params["tx0"] == '"wind"'
    assert "tx1" not in built.params


@pytest.mark.parametrize(
    "planned",
    [
        keyword(optional_terms=('"', '""')),
        keyword(required_terms=('"',)),
        keyword(phrases=("*",)),
    ],
)
def test_nothing_searchable_left_or_required_is_an_empty_query(planned: PlannedQuery) -> None:
    reasons = [r.reason for r in _world().validate([planned]).rejections]
    assert reasons == [RejectionReason.EMPTY_QUERY]


@settings(max_examples=300, deadline=None)
@given(term=st.text(min_size=1))
def test_renders_empty_is_exactly_an_empty_contains_phrase(term: str) -> None:
    """What the validator asks is what the builder would bind: ``"`` plus whitespace only."""
    assert renders_empty(term) == (not containstable_phrase(term)[1:-1].strip())


def test_required_terms_too_many_to_build_are_refused_not_left_to_execution() -> None:
    """Some hundreds of ranked joins are deeper than SQLAlchemy can build: the validator
    could not measure such a statement and issued it, and execution failed as ``UNKNOWN``.
    A policy allowing that many terms now gets ``TERM_LIMIT_EXCEEDED``."""
    policy = CapabilityLimits(max_terms_per_query=2000)
    many = keyword(required_terms=_words(1500))
    stated = make_world(capabilities={"s-1": provider().capabilities}, limits=policy)
    assert [r.reason for r in stated.validate([many]).rejections] == [
        RejectionReason.TERM_LIMIT_EXCEEDED
    ]
    (unmeasured,) = (
        make_world(capabilities={"s-1": ALL_CAPS}, limits=policy).validate([many]).queries
    )
    with pytest.raises(RecursionError):
        uncached_builder().build(unmeasured)
