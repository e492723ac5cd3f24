"""``esra explain``: one search explained on the embedded default, printed as JSON, audited.

The command runs the pipeline over the embedded default's own parts (its demo sources, its
state database), as the caller ``--subject``/``--as`` name; its explain is recorded as
``esra.explain`` by ``cli:<user>`` in the state database, which ``esra audit`` reads back.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from esra.starlette._cli import main
from esra.starlette._embedded import EMBEDDED_TENANT

EXPOSURE = "larkspur"


def _explain(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, object]]:
    status = main(["explain", *argv])
    out = capsys.readouterr().out
    return status, json.loads(out)


def test_explain_prints_the_decisions_of_one_search(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = str(tmp_path / "home")
    status, explained = _explain(
        capsys,
        "parental leave policy",
        "--exposure",
        EXPOSURE,
        "--subject",
        "alice",
        "--as",
        "region=emea",
        "--data-dir",
        data,
    )

    assert status == 0
    assert explained["tenantId"] == EMBEDDED_TENANT
    assert explained["error"] is None
    decisions = explained["decisions"]
    assert isinstance(decisions, list)
    assert decisions[0]["event"] == "esra.sources.resolve"
    queries = explained["queries"]
    assert isinstance(queries, list)
    # The demo's sources are SQLite: every statement is rendered, parameters named only.
    assert all(q["statement"] is not None for q in queries)
    assert all(":" in q["statement"]["text"] for q in queries)
    assert main(["audit", "--data-dir", data, "--tenant", EMBEDDED_TENANT, "--event",
                 "esra.explain"]) == 0  # fmt: skip
    (line,) = capsys.readouterr().out.splitlines()
    record = json.loads(line)
    assert record["outcome"] == "ok"
    assert record["dimensions"]["subject"].startswith("cli:")
    assert record["dimensions"]["explained_subject"] == "alice"


def test_an_unknown_exposure_is_explained_as_not_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, explained = _explain(
        capsys, "leave", "--exposure", "no_such_tool", "--data-dir", str(tmp_path / "home")
    )
    assert status == 1
    assert explained["error"] == "ESRA_EXPOSURE_NOT_FOUND"


def test_a_malformed_claim_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(["explain", "leave", "--exposure", EXPOSURE, "--as", "no-equals-sign",
                   "--data-dir", str(tmp_path / "home")])  # fmt: skip
    assert status == 2
    assert "--as takes NAME=VALUE" in capsys.readouterr().err
