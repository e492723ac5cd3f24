"""The validator holds a plan to what its provider states it can render and send.

A provider may state a ``TextRendering`` with limits on one full-text search condition and on
command text. The validator drops optional and excluded terms the provider renders to
nothing, rejects a required term or phrase that does (``EMPTY_QUERY``), and rejects a query
whose rendered statement exceeds a stated limit (``TERM_LIMIT_EXCEEDED``) — before any
statement is sent. ``tests/sqlserver/test_stated_limits.py`` checks the SQL Server rendering.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from esra.core._pipeline.validation import Rejection
from esra.core.codes import RejectionReason, WarningCode
from esra.core.ports import RenderedLengths
from esra.core.providers import ValidatedQuery
from tests.core._validation_fixtures import ALL_CAPS, World, keyword, make_world


class _QuotedTerms:
    """Renders like a quoting engine: ``"`` is removed, and each required term, phrase and
    excluded term is its own condition ``"term"``; the optional terms share one, joined by
    spaces. The command is 100 units plus 10 per condition."""

    def renders_empty(self, term: str) -> bool:
        return not term.replace('"', "").strip()

    def rendered_lengths(self, query: ValidatedQuery) -> RenderedLengths | None:
        quoted = [len(t.replace('"', "")) + 2 for t in query.required_terms]
        quoted += [len(t.replace('"', "")) + 2 for t in (*query.phrases, *query.excluded_terms)]
        if query.optional_terms:
            quoted.append(len(" ".join(t.replace('"', "") for t in query.optional_terms)))
        return RenderedLengths(text_conditions=tuple(quoted), command=100 + 10 * len(quoted))


class _Unbuildable(_QuotedTerms):
    def rendered_lengths(self, query: ValidatedQuery) -> RenderedLengths | None:
        return None


def _world(**stated: Any) -> World:
    caps = attrs.evolve(ALL_CAPS, rendering=stated.pop("rendering", _QuotedTerms()), **stated)
    return make_world(capabilities={"s-1": caps, "s-2": ALL_CAPS, "s-3": ALL_CAPS})


def _reasons(world: World, **kw: Any) -> list[RejectionReason]:
    return [r.reason for r in world.validate([keyword(**kw)]).rejections]


def test_an_optional_term_rendering_to_nothing_is_dropped() -> None:
    (query,) = _world().validate([keyword(optional_terms=('"""', "solar", '" "'))]).queries
    assert query.optional_terms == ("solar",)


def test_an_excluded_term_rendering_to_nothing_is_dropped() -> None:
    planned = keyword(optional_terms=("solar",), excluded_terms=('""', "wind"))
    (query,) = _world().validate([planned]).queries
    assert query.excluded_terms == ("wind",)


def test_a_query_left_with_nothing_to_search_is_an_empty_query() -> None:
    """Only RECENT may run without content, as for a plan that had no terms at all."""
    assert _reasons(_world(), optional_terms=('"', '""')) == [RejectionReason.EMPTY_QUERY]
    (recent,) = _world().validate([keyword(strategy="recent", optional_terms=('"',))]).queries
    assert recent.optional_terms == ()


@pytest.mark.parametrize("kw", [{"required_terms": ('"',)}, {"phrases": ("alpha", '" "')}])
def test_a_required_term_or_phrase_rendering_to_nothing_is_rejected(kw: dict[str, Any]) -> None:
    """Dropping it would widen the search beyond what was asked; sending it, the engine
    would refuse an empty condition."""
    assert _reasons(_world(), optional_terms=("solar",), **kw) == [RejectionReason.EMPTY_QUERY]


def test_without_a_stated_rendering_every_non_blank_term_is_kept() -> None:
    (query,) = make_world().validate([keyword(optional_terms=('"', "solar"))]).queries
    assert query.optional_terms == ('"', "solar")


def test_a_condition_longer_than_the_stated_limit_is_rejected() -> None:
    """The limit applies to the condition as rendered, inclusive: ``"`` removed, quotes
    added, optional terms joined."""
    world = _world(max_text_condition_length=12)
    assert world.validate([keyword(required_terms=("a" * 10,))]).queries  # '"a…a"' is 12
    assert _reasons(world, required_terms=("a" * 11,)) == [RejectionReason.TERM_LIMIT_EXCEEDED]
    assert world.validate([keyword(optional_terms=('"abcde"', "fghijk"))]).queries  # 12
    assert _reasons(world, optional_terms=("abcdef", "ghijkl")) == [
        RejectionReason.TERM_LIMIT_EXCEEDED
    ]


def test_command_text_longer_than_the_stated_limit_is_rejected() -> None:
    world = _world(max_command_length=130)
    three = ("a", "b", "c")
    assert world.validate([keyword(required_terms=three, optional_terms=())]).queries  # 130
    assert _reasons(world, required_terms=(*three, "d"), optional_terms=()) == [
        RejectionReason.TERM_LIMIT_EXCEEDED
    ]


def test_a_rejection_for_length_is_warned_and_does_not_use_up_the_cap() -> None:
    world = _world(max_text_condition_length=12)
    too_long = keyword(required_terms=("a" * 11,))
    outcome = world.validate([too_long, keyword(), keyword(), keyword()])
    assert [q.query_id for q in outcome.queries] == ["s-1#1", "s-1#2", "s-1#3"]
    assert outcome.rejections == (Rejection("s-1", "m-1", RejectionReason.TERM_LIMIT_EXCEEDED),)
    (warning,) = outcome.warnings
    assert warning.code is WarningCode.ESRA_PLAN_REJECTED
    assert "TERM_LIMIT_EXCEEDED" in warning.message


def test_a_statement_the_provider_cannot_measure_is_left_to_execution() -> None:
    world = _world(rendering=_Unbuildable(), max_text_condition_length=1, max_command_length=1)
    assert world.validate([keyword(required_terms=("a" * 50,))]).queries


@pytest.mark.parametrize("field", ["max_text_condition_length", "max_command_length"])
def test_a_limit_needs_a_rendering_to_measure_it_and_is_positive(field: str) -> None:
    unmeasured: dict[str, Any] = {field: 4000}
    with pytest.raises(ValueError, match="needs the rendering"):
        attrs.evolve(ALL_CAPS, **unmeasured)
    zero: dict[str, Any] = {"rendering": _QuotedTerms(), field: 0}
    with pytest.raises(ValueError, match="at least 1"):
        attrs.evolve(ALL_CAPS, **zero)


def test_more_scored_terms_than_the_provider_states_is_rejected() -> None:
    """Required terms, optional words and phrases count, each once, inclusive of the bound;
    excluded terms are not scored and do not count."""
    world = _world(max_scored_terms=4)
    assert world.validate(
        [keyword(required_terms=("a",), optional_terms=("b", "c"), phrases=("d e",))]
    ).queries
    unscored = keyword(optional_terms=("a", "b", "c", "d"), excluded_terms=("x", "y", "z"))
    assert world.validate([unscored]).queries
    assert _reasons(
        world, required_terms=("a",), optional_terms=("b", "c"), phrases=("d", "e")
    ) == [RejectionReason.TERM_LIMIT_EXCEEDED]


def test_scored_terms_are_counted_as_the_query_is_issued() -> None:
    """An optional term of several words is several scored words; a repeated word and one
    that renders to nothing are gone before the count."""
    world = _world(max_scored_terms=3)
    assert _reasons(world, optional_terms=("heat transfer", "wing flutter")) == [
        RejectionReason.TERM_LIMIT_EXCEEDED
    ]
    (query,) = world.validate(
        [keyword(optional_terms=("heat transfer", "Heat", '"', "wing"))]
    ).queries
    assert query.optional_terms == ("heat", "transfer", "wing")


def test_a_scored_term_limit_is_positive_and_needs_no_rendering() -> None:
    assert attrs.evolve(ALL_CAPS, max_scored_terms=1).rendering is None
    with pytest.raises(ValueError, match="'max_scored_terms' must be >= 1"):
        attrs.evolve(ALL_CAPS, max_scored_terms=0)
