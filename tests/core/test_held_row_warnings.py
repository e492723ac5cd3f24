"""A newer ESRA's held outbox row is logged once per process, not at every forward.

During a rolling upgrade such a row stays held until a newer host delivers it, and every
forward of every request passes over it again: one warning per pass buried the log.
"""

from __future__ import annotations

import json
import logging

import pytest

from esra.core.audit import read_held_row
from esra.core.testing.audit_outbox_contract import newer_record_text


def _pass_over(outbox: str, seq: int) -> None:
    text = newer_record_text(event="esra.from.a.newer.version")
    assert read_held_row(outbox, seq, json.loads(text), text.encode()) is None


def test_a_newer_row_is_warned_of_once_however_often_it_is_passed_over(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="esra.core._audit.held_rows"):
        for _ in range(5):
            _pass_over("warned-once", 7)
        _pass_over("warned-once", 8)  # another row is news
        _pass_over("another-outbox", 7)  # and so is another outbox's
    warned = [r for r in caplog.records if "newer ESRA host" in r.getMessage()]
    assert len(warned) == 3
