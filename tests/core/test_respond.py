"""Stage 8: top-K, then allowlist → masking → size cap → sanitization, and the status."""

from __future__ import annotations

from datetime import date
from typing import Any, cast

import attrs

from esra.core._masking import MASK
from esra.core._pipeline.rerank import RankedCandidate, rerank
from esra.core._pipeline.respond import MAX_WARNING_CHARS, respond
from esra.core._query import RowValue
from esra.core._response import ResponseStatus, ResponseWarning, ResultItem, RetrievalResponse
from esra.core.codes import ErrorCode, WarningCode
from esra.core.config import MaskingKind, MaskingRule, RerankWeights
from esra.core.testing import FakeLanguageModel
from tests.core._ranking_fixtures import candidate, mapping, ranked, scope

NAMES = {"s-a": "Alpha Wiki", "s-b": "Beta Tickets"}


def _respond(
    items: list[RankedCandidate],
    *,
    warnings: list[ResponseWarning] | None = None,
    top_k: int = 10,
    size_cap_chars: int = 20_000,
    fragment_chars: int = 400,
) -> RetrievalResponse:
    return respond(
        items,
        scope=scope(top_k=top_k, size_cap_chars=size_cap_chars, fragment_chars=fragment_chars),
        warnings=warnings or [],
        correlation_id="corr-1",
        source_names=NAMES,
    )


def _chars(item: ResultItem) -> int:
    return (
        len(item.title) + len(item.fragment) + sum(len(k) + len(v) for k, v in item.fields.items())
    )


def _long(n: int) -> RankedCandidate:
    body = " ".join(f"lorem{i}" for i in range(60)) + " needle " + "tail " * 20
    c = candidate("s-a", f"k{n}", 1.0, values={"title": f"T{n}", "body": body}, terms=("needle",))
    return ranked(c, f"r_{n}", 1.0 - n / 10)


def test_top_k_follows_the_ranked_order() -> None:
    """The first top_k ranked candidates are returned, in order, with rounded final scores."""
    items = [
        ranked(candidate("s-a" if n % 2 else "s-b", f"k{n}", 0.5), f"r_{n}", 1 / (n + 3))
        for n in range(5)
    ]
    response = _respond(items, top_k=3)
    assert [r.result_id for r in response.results] == ["r_0", "r_1", "r_2"]
    assert [r.score for r in response.results] == [0.333333, 0.25, 0.2]
    assert [r.source for r in response.results] == ["Beta Tickets", "Alpha Wiki", "Beta Tickets"]
    assert response.correlation_id == "corr-1"


def test_allowlist_drops_restricted_hidden_and_unknown_fields() -> None:
    """A field the mapping restricts, hides or does not know never appears, even if a
    provider returned it and even if it has a masking rule."""
    m = mapping(masking=(MaskingRule("salary", MaskingKind.FULL),))
    values: dict[str, RowValue] = {
        "title": "Report",
        "body": "body text",
        "salary": "SALARY-99",
        "internal_note": "NOTE-77",
        "phys_doc_key": "KEY-55",
        "updated": date(2025, 1, 2),
        "approved": True,
        "pages": 12,
        "owner_email": None,
    }
    response = _respond([ranked(candidate("s-a", "k", 1.0, m=m, values=values), "r_1", 0.9)])
    (item,) = response.results
    assert item.fields == {"updated": "2025-01-02", "approved": "true", "pages": "12"}
    text = repr(response)
    for forbidden in ("SALARY-99", "NOTE-77", "KEY-55", MASK):
        assert forbidden not in text
    assert item.title == "Report"
    assert item.fragment == "body text"


def test_masking_applies_to_fields_title_and_fragment() -> None:
    """Masked fields are returned masked; masked content is what the fragment is cut from."""
    m = mapping(
        masking=(
            MaskingRule("owner_email", MaskingKind.EMAIL),
            MaskingRule("title", MaskingKind.LAST4),
            MaskingRule("body", MaskingKind.FULL),
        )
    )
    values = {"title": "Invoice 55501234", "body": "secret body", "owner_email": "bo@x.example"}
    (item,) = _respond([ranked(candidate("s-a", "k", 1.0, m=m, values=values), "r", 1.0)]).results
    assert item.fields == {"owner_email": f"b{MASK}@x.example"}
    assert item.title == MASK + "1234"
    assert item.fragment == MASK


def test_the_masked_value_is_what_the_size_cap_measures() -> None:
    """A 22-character account masked to 8 fits a cap sized for the masked form exactly."""
    m = mapping(masking=(MaskingRule("account", MaskingKind.LAST4),))
    values = {"title": "T", "body": "abc", "account": "DE89370400440532013000"}
    item = ranked(candidate("s-a", "k", 1.0, m=m, values=values), "r", 1.0)
    masked_size = len("T") + len("abc") + len("account") + len(MASK + "3000")
    fits = _respond([item], size_cap_chars=masked_size)
    assert fits.status is ResponseStatus.COMPLETE
    assert fits.results[0].fields == {"account": MASK + "3000"}
    over = _respond([item], size_cap_chars=masked_size - 1)
    assert over.results == ()
    assert [w.code for w in over.warnings] == [WarningCode.ESRA_RESPONSE_TRUNCATED]


def test_size_cap_shortens_fragments_before_dropping_results() -> None:
    """When shorter fragments suffice every result is kept and the warning says so."""
    items = [_long(n) for n in range(3)]
    full = _respond(items, fragment_chars=200)
    assert all(len(r.fragment) > 150 for r in full.results)
    cap = 3 * len("T0") + 3 * 100
    response = _respond(items, fragment_chars=200, size_cap_chars=cap)
    assert len(response.results) == 3
    assert sum(_chars(r) for r in response.results) <= cap
    assert all("needle" in r.fragment for r in response.results)
    (warning,) = response.warnings
    assert warning.code is WarningCode.ESRA_RESPONSE_TRUNCATED
    assert "0 result(s) dropped" in warning.message
    assert "3 fragment(s) shortened" in warning.message
    assert response.status is ResponseStatus.DEGRADED


async def test_the_response_shows_the_fragment_the_rerank_showed_the_model() -> None:
    """A reranked candidate carries its fragment; the response shows it unchanged — equal to
    cutting the content afresh — and cuts it shorter from the content when the cap needs."""
    items = [_long(n) for n in range(3)]
    fresh = _respond(items, fragment_chars=200)
    outcome = await rerank(
        "needle",
        [r.candidate for r in items],
        model=FakeLanguageModel(),
        weights=RerankWeights(),
        max_candidates=40,
        fragment_chars=200,
        source_names=NAMES,
        model_profile="default",
    )
    assert all(r.fragment is not None for r in outcome.ranked)
    handed = _respond(list(outcome.ranked), fragment_chars=200)
    assert sorted(r.fragment for r in handed.results) == sorted(r.fragment for r in fresh.results)
    # The given fragment is what is shown, not recomputed...
    marked = [attrs.evolve(items[0], fragment="the rerank's own fragment")]
    assert _respond(marked, fragment_chars=200).results[0].fragment == "the rerank's own fragment"
    # ...until the size cap shortens it, which cuts from the whole content around the term.
    cap = 3 * len("T0") + 3 * 100
    capped = _respond(list(outcome.ranked), fragment_chars=200, size_cap_chars=cap)
    assert all("needle" in r.fragment and len(r.fragment) <= 100 for r in capped.results)


def test_size_cap_drops_trailing_results_when_fragments_are_at_the_floor() -> None:
    """Below what floor-length fragments need, the lowest-ranked results go first."""
    items = [_long(n) for n in range(3)]
    cap = 3 * len("T0") + 2 * 40 + 10
    response = _respond(items, fragment_chars=200, size_cap_chars=cap)
    assert [r.result_id for r in response.results] == ["r_0", "r_1"]
    assert sum(_chars(r) for r in response.results) <= cap
    (warning,) = response.warnings
    assert "1 result(s) dropped" in warning.message
    assert "2 fragment(s) shortened" in warning.message


def test_sanitization_keeps_only_classified_warnings_cleaned_and_capped() -> None:
    """Unclassified codes are dropped; control characters go; messages stop at 300 chars."""
    warnings = [
        ResponseWarning(WarningCode.ESRA_SOURCE_FAILED, "Source\x00 Alpha\nfailed: TIMEOUT\x1b"),
        ResponseWarning(cast(Any, ErrorCode.ESRA_INTERNAL), "psycopg: relation phys_x"),
        ResponseWarning(cast(Any, "ESRA_MADE_UP"), "made up"),
        ResponseWarning(WarningCode.ESRA_PLAN_REJECTED, "x" * 1000),
        ResponseWarning(WarningCode.ESRA_PLAN_REJECTED, "x" * 1000),
    ]
    response = _respond([], warnings=warnings)
    assert [w.code for w in response.warnings] == [
        WarningCode.ESRA_SOURCE_FAILED,
        WarningCode.ESRA_PLAN_REJECTED,
    ]
    assert response.warnings[0].message == "Source Alpha failed: TIMEOUT"
    assert len(response.warnings[1].message) == MAX_WARNING_CHARS
    assert "phys_x" not in repr(response)
    assert response.status is ResponseStatus.DEGRADED


def test_status_is_complete_without_warnings() -> None:
    """No warning at all (or only unclassified ones, which are dropped): complete."""
    item = ranked(candidate("s-a", "k", 1.0), "r", 1.0)
    assert _respond([item]).status is ResponseStatus.COMPLETE
    dropped_only = _respond([item], warnings=[ResponseWarning(cast(Any, "BOGUS"), "x")])
    assert dropped_only.status is ResponseStatus.COMPLETE
    assert dropped_only.warnings == ()


def test_status_is_degraded_with_any_upstream_warning() -> None:
    """One upstream warning makes the response degraded and is carried through."""
    warning = ResponseWarning(WarningCode.ESRA_RERANK_FALLBACK, "Reranking was unavailable.")
    response = _respond([ranked(candidate("s-a", "k", 1.0), "r", 1.0)], warnings=[warning])
    assert response.status is ResponseStatus.DEGRADED
    assert response.warnings == (warning,)


def test_no_results_and_no_warnings_is_an_empty_complete_response() -> None:
    """Nothing found is a complete answer: there is nothing to explain."""
    response = _respond([])
    assert response.results == ()
    assert response.status is ResponseStatus.COMPLETE
