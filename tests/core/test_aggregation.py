"""Stage 6: per-query normalization, weighting, deduplication and the extra-match bonus."""

from __future__ import annotations

import math
from datetime import UTC, date, datetime, timedelta

import pytest

from esra.core._pipeline.aggregation import (
    aggregate,
    extra_match_bonus,
    freshness_weight,
    normalize,
)
from esra.core._query import Strategy
from tests.core._ranking_fixtures import mapping, query, result

NOW = datetime(2026, 1, 1, tzinfo=UTC)
YEAR = timedelta(days=365.25)


def test_normalize_is_min_max() -> None:
    """Scores map to (native − min) / (max − min)."""
    assert normalize([2.0, 4.0, 3.0, 10.0]) == [0.0, 0.25, 0.125, 1.0]


def test_normalize_equal_scores_are_all_one() -> None:
    """When max == min every row normalizes to 1.0, including a single row."""
    assert normalize([7.5, 7.5, 7.5]) == [1.0, 1.0, 1.0]
    assert normalize([-3.0]) == [1.0]
    assert normalize([]) == []


def test_normalize_treats_non_finite_scores_as_extremes() -> None:
    """A NaN or −inf score counts as the worst row and +inf as the best; others stay exact."""
    assert normalize([1.0, math.nan, 3.0, math.inf, -math.inf]) == [0.0, 0.0, 1.0, 1.0, 0.0]


def test_freshness_weight_decays_with_age() -> None:
    """A value two years old weighs 1 / (1 + 0.5 × 2) = 0.5; one year old weighs 2/3."""
    assert freshness_weight(NOW - 2 * YEAR, NOW) == pytest.approx(0.5)
    assert freshness_weight(NOW - YEAR, NOW) == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    "value",
    [None, "not a date", "", 42, True, 3.5, NOW + YEAR, (NOW + YEAR).isoformat()],
)
def test_freshness_weight_is_neutral_without_a_usable_past_date(value: object) -> None:
    """Missing, unparseable, non-date and future values weigh exactly 1.0."""
    assert freshness_weight(value, NOW) == 1.0  # type: ignore[arg-type]


def test_freshness_weight_reads_dates_strings_and_naive_times_as_utc() -> None:
    """A date, an ISO string and a naive datetime are all read, the naive one as UTC."""
    two_years = NOW - 2 * YEAR
    assert freshness_weight(date(2024, 1, 1), NOW) == pytest.approx(1 / (1 + 0.5 * (731 / 365.25)))
    assert freshness_weight(two_years.isoformat(), NOW) == pytest.approx(0.5)
    assert freshness_weight(two_years.replace(tzinfo=None), NOW) == pytest.approx(0.5)


def test_each_query_is_normalized_over_its_own_rows() -> None:
    """Native scales never meet: a 1000-point engine and a 0–1 engine normalize alike."""
    big = query("s-a#1", mapping("m-a", "s-a"))
    small = query("s-b#1", mapping("m-b", "s-b"))
    candidates = aggregate(
        [
            result(big, [("a1", 1000.0, {}), ("a2", 500.0, {}), ("a3", 0.0, {})]),
            result(small, [("b1", 0.9, {}), ("b2", 0.5, {}), ("b3", 0.1, {})]),
        ],
        priority={},
        now=NOW,
    )
    by_key = {c.key: c.weighted for c in candidates}
    assert by_key == {"a1": 1.0, "b1": 1.0, "a2": 0.5, "b2": 0.5, "a3": 0.0, "b3": 0.0}


def test_weighted_is_normalized_times_priority_times_freshness() -> None:
    """weighted = normalized × priorityWeight(source) × freshnessWeight(row)."""
    m = mapping(freshness=True)
    q = query("s-a#1", m, freshness=True)
    rows = [
        ("old", 10.0, {"updated": NOW - 2 * YEAR}),
        ("mid", 6.0, {"updated": NOW - YEAR}),
        ("low", 2.0, {"updated": NOW}),
    ]
    candidates = aggregate([result(q, rows)], priority={"s-a": 2.0}, now=NOW)
    by_key = {c.key: c for c in candidates}
    assert by_key["old"].weighted == pytest.approx(1.0 * 2.0 * 0.5)
    assert by_key["mid"].weighted == pytest.approx(0.5 * 2.0 * (2 / 3))
    assert by_key["low"].weighted == 0.0
    assert by_key["mid"].provenance[0].normalized == 0.5


def test_freshness_is_ignored_when_the_query_has_no_freshness_field() -> None:
    """A row's date does not weigh in unless the query carries the freshness field."""
    m = mapping(freshness=True)
    q = query("s-a#1", m, freshness=False)
    candidates = aggregate(
        [result(q, [("k", 5.0, {"updated": NOW - 4 * YEAR})])], priority={}, now=NOW
    )
    assert candidates[0].weighted == 1.0


def test_duplicates_keep_the_best_weighted_row_and_merge_provenance() -> None:
    """The same record from two queries keeps the higher weighted score, its values, and both
    provenance entries with native scores verbatim."""
    m = mapping()
    first = query("s-a#1", m, strategy=Strategy.KEYWORD, optional=("alpha",))
    second = query("s-a#2", m, strategy=Strategy.PHRASE, phrases=("beta gamma",))
    candidates = aggregate(
        [
            result(first, [("x", 4.25, {"title": "from first"}), ("y", 8.5, {})]),
            result(second, [("x", 0.731, {"title": "from second"}), ("z", 0.1, {})]),
        ],
        priority={},
        now=NOW,
    )
    x = next(c for c in candidates if c.key == "x")
    assert x.best_weighted == 1.0
    assert x.values == {"title": "from second"}
    assert x.bonus == pytest.approx(0.02)
    assert x.weighted == pytest.approx(1.02)
    assert [(p.query_id, p.strategy, p.native_score) for p in x.provenance] == [
        ("s-a#2", Strategy.PHRASE, 0.731),
        ("s-a#1", Strategy.KEYWORD, 4.25),
    ]
    assert [p.weighted for p in x.provenance] == [1.0, 0.0]
    assert set(x.matched_terms) == {"alpha", "beta gamma"}
    assert len(candidates) == 3


def test_extra_match_bonus_is_capped() -> None:
    """Found by eight queries: +0.02 per extra match would be 0.14, but the cap is 0.1."""
    m = mapping()
    results = [result(query(f"s-a#{n}", m), [("k", 1.0, {})]) for n in range(1, 9)]
    (only,) = aggregate(results, priority={}, now=NOW)
    assert only.bonus == 0.1
    assert len(only.provenance) == 8
    assert [extra_match_bonus(n) for n in (0, 1, 2, 3, 6, 7, 50)] == pytest.approx(
        [0.0, 0.0, 0.02, 0.04, 0.1, 0.1, 0.1]
    )


def test_a_key_repeated_within_one_query_counts_once() -> None:
    """The bonus counts distinct queries: a provider returning a key twice earns nothing."""
    q = query("s-a#1", mapping())
    (only, _) = aggregate(
        [result(q, [("k", 3.0, {}), ("k", 2.0, {}), ("j", 1.0, {})])], priority={}, now=NOW
    )
    assert only.key == "k"
    assert only.bonus == 0.0
    assert len(only.provenance) == 1


def test_same_key_in_different_mappings_or_sources_stays_distinct() -> None:
    """Deduplication is by (source, mapping, key): equal keys elsewhere are other records."""
    results = [
        result(query("s-a#1", mapping("m-1", "s-a")), [("k", 1.0, {})]),
        result(query("s-a#2", mapping("m-2", "s-a")), [("k", 1.0, {})]),
        result(query("s-b#1", mapping("m-1b", "s-b")), [("k", 1.0, {})]),
    ]
    candidates = aggregate(results, priority={}, now=NOW)
    assert [(c.source_id, c.mapping.id) for c in candidates] == [
        ("s-a", "m-1"),
        ("s-a", "m-2"),
        ("s-b", "m-1b"),
    ]
    assert all(c.bonus == 0.0 for c in candidates)


def test_output_is_sorted_by_weighted_then_source_mapping_key() -> None:
    """Ties on weighted break by source id, mapping id, then key; input order is irrelevant."""
    ma, mb = mapping("m-a", "s-a"), mapping("m-b", "s-b")
    results = [
        result(query("s-b#1", mb), [("b2", 1.0, {}), ("b1", 1.0, {}), ("b0", 0.0, {})]),
        result(query("s-a#1", ma), [("a9", 5.0, {}), ("a1", 5.0, {})]),
    ]
    keys = [c.key for c in aggregate(results, priority={}, now=NOW)]
    assert keys == ["a1", "a9", "b1", "b2", "b0"]
    assert keys == [c.key for c in aggregate(results[::-1], priority={}, now=NOW)]


def test_matched_terms_exclude_excluded_terms() -> None:
    """Fragments center on what was searched for, never on what was excluded."""
    q = query("s-a#1", mapping(), required=("alpha",), optional=("beta",), excluded=("gamma",))
    (only,) = aggregate([result(q, [("k", 1.0, {})])], priority={}, now=NOW)
    assert only.matched_terms == ("alpha", "beta")


def test_missing_priority_defaults_to_one_and_zero_priority_zeroes() -> None:
    """A source absent from the priority map weighs 1.0; a zero-priority source weighs 0."""
    results = [
        result(query("s-a#1", mapping("m-a", "s-a")), [("a", 1.0, {})]),
        result(query("s-b#1", mapping("m-b", "s-b")), [("b", 1.0, {})]),
    ]
    by_key = {c.key: c.weighted for c in aggregate(results, priority={"s-b": 0.0}, now=NOW)}
    assert by_key == {"a": 1.0, "b": 0.0}
