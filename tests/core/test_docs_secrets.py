"""The key-rotation example in docs/secrets.md runs as written."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).parents[2] / "docs" / "secrets.md"
_BLOCK = re.compile(r"```python\n(.*?)\n```", re.DOTALL)


def test_the_rotation_example_runs() -> None:
    """Every python block of the page executes without error (its asserts included)."""
    blocks = _BLOCK.findall(DOC.read_text(encoding="utf-8"))
    assert len(blocks) == 1
    for code in blocks:
        exec(compile(code, str(DOC), "exec"), {"__name__": "docs_example"})  # noqa: S102
