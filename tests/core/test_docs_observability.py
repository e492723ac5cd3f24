"""docs/observability.md's example installs a tracer provider as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from opentelemetry import trace

DOC = Path(__file__).parents[2] / "docs" / "observability.md"


def test_the_sdk_example_runs_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    """The block builds a provider with a batch processor and installs it globally (captured
    here: a process has one global provider, which the telemetry tests own)."""
    (block,) = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    installed: list[object] = []
    monkeypatch.setattr(trace, "set_tracer_provider", installed.append)
    exec(compile(block, str(DOC), "exec"), {})  # noqa: S102 - the documentation's own code
    (provider,) = installed
    assert type(provider).__name__ == "TracerProvider"
    assert provider.get_tracer("esra").start_span("x").is_recording()  # type: ignore[attr-defined]
