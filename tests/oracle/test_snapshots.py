"""Snapshot tests: the exact Oracle command text per strategy.

The expected text lives in ``tests/oracle/snapshots/<case>.sql``. Updating it is a
deliberate act: run ``ESRA_UPDATE_SNAPSHOTS=1 python -m pytest tests/oracle/test_snapshots.py``
and review the diff before committing; without the variable a mismatch fails.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from esra.core.config.mapping import FieldType, Operator
from esra.core.query import ResolvedFilter, Strategy
from tests.oracle.conftest import issue, uncached_builder

SNAPSHOTS = Path(__file__).parent / "snapshots"

CASES: dict[str, dict[str, Any]] = {
    "phrase": {"strategy": Strategy.PHRASE, "phrases": ("solar panel",)},
    "keyword": {
        "strategy": Strategy.KEYWORD,
        "required_terms": ("solar",),
        "optional_terms": ("inverter", "panel"),
        "excluded_terms": ("budget",),
        "filters": (
            ResolvedFilter("art_category", FieldType.TEXT, Operator.IN, ("energy", "ops")),
            ResolvedFilter("art_year", FieldType.INTEGER, Operator.GTE, (2021,)),
        ),
    },
    "synonym": {"strategy": Strategy.SYNONYM, "optional_terms": ("car", "automobile", "auto")},
    "acronym": {"strategy": Strategy.ACRONYM, "optional_terms": ("CRM", "customer relationship")},
    "entity": {
        "strategy": Strategy.ENTITY,
        "required_terms": ("Globex",),
        "phrases": ("Acme Corp",),
    },
    "recent": {"strategy": Strategy.RECENT},
    "excluded_only": {"strategy": Strategy.RECENT, "excluded_terms": ("draft",)},
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_rendered_sql_matches_the_snapshot(case: str) -> None:
    """The command text for each strategy is exactly the reviewed snapshot."""
    built = uncached_builder().build(issue(**CASES[case]))
    path = SNAPSHOTS / f"{case}.sql"
    if os.environ.get("ESRA_UPDATE_SNAPSHOTS") == "1":
        path.write_text(built.sql + "\n", encoding="utf-8")
    assert built.sql + "\n" == path.read_text(encoding="utf-8")
    # Every value, the row cap included, is a bind parameter.
    assert built.params["lim"] == 50
    assert "FETCH FIRST :lim ROWS ONLY" in built.sql
