"""Shared snapshot scaffolding: the strategy cases and the reviewed-text comparison.

Updating a snapshot is a deliberate act: run the engine's ``test_snapshots`` with
``ESRA_UPDATE_SNAPSHOTS=1`` and review the diff before committing; without the variable a
mismatch fails.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from esra.core._config.mapping import FieldType, Operator
from esra.core._query import ResolvedFilter, Strategy

__all__ = ["CASES", "assert_matches_snapshot"]

# One query per strategy (and the excluded-only edge), as overrides of ``issue``'s defaults.
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


def assert_matches_snapshot(sql: str, path: Path) -> None:
    """``sql`` is exactly the reviewed text in ``path`` (rewritten first when
    ``ESRA_UPDATE_SNAPSHOTS=1``)."""
    if os.environ.get("ESRA_UPDATE_SNAPSHOTS") == "1":
        path.write_text(sql + "\n", encoding="utf-8")
    assert sql + "\n" == path.read_text(encoding="utf-8")
