"""Snapshot tests: the exact Oracle command text per strategy.

The expected text lives in ``tests/oracle/snapshots/<case>.sql``. Updating it is a
deliberate act: run ``ESRA_UPDATE_SNAPSHOTS=1 python -m pytest tests/oracle/test_snapshots.py``
and review the diff before committing; without the variable a mismatch fails.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._snapshots import CASES, assert_matches_snapshot
from tests.oracle.conftest import issue, uncached_builder

SNAPSHOTS = Path(__file__).parent / "snapshots"


@pytest.mark.parametrize("case", sorted(CASES))
def test_rendered_sql_matches_the_snapshot(case: str) -> None:
    """The command text for each strategy is exactly the reviewed snapshot."""
    built = uncached_builder().build(issue(**CASES[case]))
    assert_matches_snapshot(built.sql, SNAPSHOTS / f"{case}.sql")
    # Every value, the row cap included, is a bind parameter.
    assert built.params["lim"] == 50
    assert "FETCH FIRST :lim ROWS ONLY" in built.sql
