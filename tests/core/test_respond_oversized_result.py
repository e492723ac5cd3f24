"""The size cap against one oversized record: it costs that result, not every result.

A record whose title and fields alone exceed the response's size cap cannot be returned at
any fragment length. The cap kept the longest fitting prefix of the ranked results, so such
a record ranked first emptied the whole response: anyone able to write one row (a huge
returnable notes field) that ranks first for a topic blanked every search for that topic.
Only such a result is left out now; results that fit together are still cut from the end,
and the order of what is returned never changes.
"""

from __future__ import annotations

from esra.core._pipeline.rerank import RankedCandidate
from esra.core._pipeline.respond import respond
from esra.core.codes import WarningCode
from tests.core._ranking_fixtures import candidate, ranked, scope

CAP = 2_000


def _item(n: int, owner: str) -> RankedCandidate:
    values = {"title": f"T{n}", "body": "needle in the body", "owner_email": owner}
    return ranked(
        candidate("s-a", f"k{n}", 1.0, values=values, terms=("needle",)), f"r_{n}", 1 - n / 10
    )


def test_an_oversized_first_result_does_not_empty_the_response() -> None:
    items = [_item(0, "x" * (CAP + 1)), _item(1, "a@b"), _item(2, "c@d")]

    response = respond(
        items,
        scope=scope(size_cap_chars=CAP),
        warnings=[],
        correlation_id="c",
        source_names={"s-a": "Alpha"},
    )

    assert [r.result_id for r in response.results] == ["r_1", "r_2"]
    (warning,) = response.warnings
    assert warning.code is WarningCode.ESRA_RESPONSE_TRUNCATED
    assert "1 result(s) dropped" in warning.message


def test_results_that_fit_alone_are_still_cut_from_the_end() -> None:
    # Each fits alone, the three do not: the lowest-ranked goes, as before.
    owner = "y" * (CAP // 2 - 100)
    items = [_item(0, owner), _item(1, owner), _item(2, owner)]

    response = respond(
        items,
        scope=scope(size_cap_chars=CAP),
        warnings=[],
        correlation_id="c",
        source_names={"s-a": "Alpha"},
    )

    assert [r.result_id for r in response.results] == ["r_0", "r_1"]
