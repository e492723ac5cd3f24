"""The access-policy examples in docs/configuration.md load as they are written."""

from __future__ import annotations

import json
import re
from pathlib import Path

from esra.core._config.access_policy import AccessPolicy
from esra.core._config.converter import load_part

DOC = Path(__file__).parents[2] / "docs" / "configuration.md"


def test_every_access_policy_example_loads() -> None:
    blocks = re.findall(r"```json\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    policies = [
        load_part(document, AccessPolicy, what="example")
        for document in map(json.loads, blocks)
        if {"slug", "capability_id"} <= document.keys()
    ]
    assert len(policies) >= 2
    narrowed = [p for p in policies if p.limits.max_rows_per_query is not None]
    assert narrowed, "the narrowing example is among them"
    assert narrowed[0].limits.max_rows_per_query == 10
