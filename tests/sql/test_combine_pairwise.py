"""``esra.sql.combine_pairwise``: a query's terms combined as a shallow tree, in their order."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from esra.sql import combine_pairwise


def test_parts_are_combined_pairwise_in_their_order() -> None:
    def grouped(left: str, right: str) -> str:
        return f"({left}{right})"

    assert combine_pairwise(["a"], grouped) == "a"
    assert combine_pairwise(["a", "b", "c", "d", "e"], grouped) == "(((ab)(cd))e)"
    assert combine_pairwise(list("abcdefg"), grouped) == "(((ab)(cd))((ef)g))"


def test_nothing_to_combine_is_an_error() -> None:
    with pytest.raises(ValueError, match="nothing"):
        combine_pairwise([], lambda left, right: left)


def _or(
    left: sa.ColumnElement[object], right: sa.ColumnElement[object]
) -> sa.ColumnElement[object]:
    return left.op("||")(right)


def test_an_operator_over_thousands_of_terms_compiles() -> None:
    """Chained one after the other, 1,000 terms joined by a custom operator (PostgreSQL's
    tsquery ``||``) were deeper than SQLAlchemy's recursive compiler could go."""
    parts: list[sa.ColumnElement[object]] = [sa.literal_column(f"q{i}") for i in range(1000)]
    assert str(sa.select(combine_pairwise(parts, _or))).count("||") == 999
    chained = parts[0]
    for part in parts[1:]:
        chained = _or(chained, part)
    with pytest.raises(RecursionError):
        str(sa.select(chained))
