"""`esra demo`: the embedded default end to end, over real SQLite files and the LocalModel."""

from __future__ import annotations

import pytest

from esra.starlette._cli import main
from esra.starlette._demo import data

pytestmark = pytest.mark.integration


def _demo(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["demo", *argv]) == 0
    return capsys.readouterr().out


def test_the_demo_answers_its_example_questions(capsys: pytest.CaptureFixture[str]) -> None:
    """Without a question the demo runs every example and each one finds results."""
    out = _demo(capsys)
    assert out.count("Q: ") == 5
    assert "(no results)" not in out
    assert "Annual leave and paid time off  [HR handbook]" in out
    assert "1. E-bike battery not charging  [Customer support desk]" in out


def test_a_question_reaches_the_fitting_source_first(capsys: pytest.CaptureFixture[str]) -> None:
    """An HR question ranks an HR policy first."""
    out = _demo(capsys, "how", "many", "vacation", "days", "do", "I", "get")
    first = next(line for line in out.splitlines() if line.strip().startswith("1. "))
    assert "[HR handbook]" in first


def test_restricted_and_masked_data_never_leave(capsys: pytest.CaptureFixture[str]) -> None:
    """Internal notes and cost prices (restricted) never print; e-mail addresses are masked."""
    out = _demo(capsys, "battery charger refund helmet warranty frame range")
    for ticket in data.TICKETS:
        assert ticket[7] not in out  # internal notes
        assert ticket[6] not in out  # customer e-mail, only its masked form may appear
    for product in data.PRODUCTS:
        assert f"cost={product[5]}" not in out
    assert "****@example.org" in out


def test_record_level_security_follows_the_region_claim(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Tickets are filtered in SQL by the caller's region claim: AMER sees its own ticket."""
    question = "support ticket about a creaking bottom bracket"
    emea = _demo(capsys, question)
    amer = _demo(capsys, "--region", "amer", question)
    assert "Gravel bike creaking bottom bracket" not in emea
    assert "Gravel bike creaking bottom bracket" in amer
