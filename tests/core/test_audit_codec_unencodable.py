"""The audit codec, the JSON-lines file and the logging sink: values JSON cannot carry.

A lone surrogate (a token's ``sub``: JSON's ``\\ud800`` escape survives decoding) or a NaN in
a record made every consumer of the encoded record fail or read non-JSON: an outbox row, a
review response, a log pipeline, ``jq`` on the audit file. Each is written as text JSON and
UTF-8 carry, and read back the same way.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import attrs
import pytest

from esra.core._audit.codec import dimensions_json, record_document, record_from_document
from esra.core._audit.jsonl import JsonLinesAuditLog
from esra.core._audit.logging_sink import LoggingAuditSink
from esra.core._audit.query import AuditQuery
from esra.core._audit.record import AuditRecord
from esra.core.testing.audit_contract import TENANT, contract_record


def _strict(text: str) -> object:
    """``text`` as standard JSON: no NaN or Infinity token, no lone surrogate."""

    def refuse(token: str) -> object:
        msg = f"not JSON: {token}"
        raise ValueError(msg)

    text.encode("utf-8")  # raises on a lone surrogate
    return json.loads(text, parse_constant=refuse)


def _hostile(n: int = 1, tenant: str = TENANT) -> AuditRecord:
    return attrs.evolve(
        contract_record(n, tenant=tenant, subject="eve\ud800", tags=("x\udfff",), ratio=math.nan),
        correlation_id="c\ud800",
        reason="r\udc80",
    )


def test_the_document_is_standard_json_and_reads_back_whole() -> None:
    """Every field: text whole, the float a token; read back as written."""
    record = _hostile()
    document = record_document(record)
    text = json.dumps(document, ensure_ascii=False)
    _strict(text)
    _strict(dimensions_json(record))
    back = record_from_document(json.loads(text))
    assert back.correlation_id == "c\ufffd"
    assert back.reason == "r\ufffd"
    assert back.dimensions == {"subject": "eve\ufffd", "tags": ("x\ufffd",), "ratio": "NaN"}


def test_a_document_written_before_reads_back_whole() -> None:
    """Lines already on disk (the bare NaN token, a surrogate escape) read back carryable."""
    line = (
        '{"at":"2026-03-01T09:00:00+00:00","correlation_id":"c\\ud800","dimensions":'
        '{"k\\udfff":["x\\ud800"],"r":NaN,"s":"\\ud800"},"event":"esra.invoke",'
        '"outcome":"ok","reason":null,"tenant_id":"t"}'
    )
    back = record_from_document(json.loads(line))
    _strict(json.dumps(record_document(back), ensure_ascii=False))
    assert back.dimensions == {"k\ufffd": ("x\ufffd",), "r": "NaN", "s": "\ufffd"}


async def test_the_audit_file_holds_only_standard_json(tmp_path: Path) -> None:
    """Every line of the file parses strictly; the records are found by their filters."""
    log = JsonLinesAuditLog(tmp_path / "audit.jsonl")
    await log.write_batch([contract_record(0), _hostile(1), _hostile(2, tenant="t\ud800")])
    for line in (tmp_path / "audit.jsonl").read_text(encoding="utf-8").splitlines():
        _strict(line)
    page = await log.query(AuditQuery(tenant_id=TENANT))
    assert [r.correlation_id for r in page.records] == ["c\ufffd", "corr-0"]
    for query in (
        AuditQuery(tenant_id=TENANT, subject="eve\ud800"),
        AuditQuery(tenant_id=TENANT, correlation_id="c\ud800"),
        AuditQuery(tenant_id="t\ud800"),
    ):
        assert len((await log.query(query)).records) == 1


async def test_the_logging_sink_writes_standard_json(caplog: pytest.LogCaptureFixture) -> None:
    """The line a log pipeline parses: no NaN token, no surrogate escape."""
    caplog.set_level(logging.INFO, logger="esra.audit")
    await LoggingAuditSink().record(_hostile())
    [line] = [r.getMessage() for r in caplog.records if r.name == "esra.audit"]
    document = _strict(line)
    assert isinstance(document, dict)
    assert document["dimensions"]["ratio"] == "NaN"
    assert "\\ud800" not in line
