"""Tests for esra.oracle._errors: real python-oracledb errors map onto the sixteen codes."""

from __future__ import annotations

from typing import Any

import oracledb
import pytest
from oracledb import errors as oracle_errors

from esra.core.codes import ProviderErrorCode
from esra.oracle._errors import (
    DPY_ERROR_CODES,
    DRG_ERROR_CODES,
    ORA_ERROR_CODES,
    ExecutionState,
    classify,
    error_codes,
)

_P = ProviderErrorCode


def _ora(code: int, text: str = "something") -> oracledb.Error:
    """The exception oracledb raises for a server error: the driver's own ``_Error`` payload
    (which adds the DPY cross-reference itself) in ``oracledb.DatabaseError``, the PEP 249
    base every server error's class derives from. ``_Error(message, code=)`` is the same in
    every release from 2.0 on; the driver's choice of subclass (``_Error.exc_type``) only
    exists from 2.1 and does not matter here, as classify reads the payload, not the class."""
    return oracledb.DatabaseError(oracle_errors._Error(f"ORA-{code:05d}: {text}", code=code))


def _dpy(number: int, **args: Any) -> oracledb.Error:
    """The exception oracledb raises for a driver (DPY) error, raised by its own
    ``_raise_err`` (the one entry point that exists with this signature from 2.0 on;
    ``_create_exception`` is only in newer releases)."""
    with pytest.raises(oracledb.Error) as raised:
        oracle_errors._raise_err(number, **args)
    return raised.value


def test_a_refused_connection_is_classified_from_the_real_driver_error() -> None:
    """oracledb's own error for a closed port (DPY-6005) is CONNECTION_REFUSED."""
    with pytest.raises(oracledb.Error) as raised:
        oracledb.connect(user="u", password="p", dsn="127.0.0.1:1/X", tcp_connect_timeout=2)
    assert 6005 in error_codes(raised.value)["DPY"]
    assert classify(raised.value) is _P.CONNECTION_REFUSED


@pytest.mark.parametrize(("code", "expected"), sorted(ORA_ERROR_CODES.items()))
def test_every_mapped_ora_code(code: int, expected: ProviderErrorCode) -> None:
    """Each ORA number maps to its code."""
    assert classify(_ora(code)) is expected


@pytest.mark.parametrize("code", [1795, 939])
def test_a_statement_over_a_server_limit_is_the_querys_fault(code: int) -> None:
    """A list over 1,000 expressions, too many arguments: the same on every attempt, so
    SYNTAX_ERROR, which is neither retried nor counted against the breaker."""
    assert classify(_ora(code)) is _P.SYNTAX_ERROR


@pytest.mark.parametrize(("code", "expected"), sorted(DRG_ERROR_CODES.items()))
def test_oracle_text_causes_decide_over_their_wrappers(
    code: int, expected: ProviderErrorCode
) -> None:
    """ORA-29902/ORA-20000 wrap the Oracle Text DRG code, which decides."""
    text = (
        f"error in executing ODCIIndexStart() routine\nORA-20000: Oracle Text error:\nDRG-{code}: x"
    )
    assert classify(_ora(29902, text)) is expected


def test_call_timeout_and_connection_closed_from_the_driver_factory() -> None:
    """DPY-4024 (call_timeout) is TIMEOUT; DPY-4011 (connection closed) CONNECTION_REFUSED."""
    assert classify(_dpy(oracle_errors.ERR_CALL_TIMEOUT_EXCEEDED, timeout=1000)) is _P.TIMEOUT
    assert classify(_dpy(oracle_errors.ERR_CONNECTION_CLOSED)) is _P.CONNECTION_REFUSED
    assert set(DPY_ERROR_CODES) >= {4024, 4011, 6005}


def test_cancel_is_timeout_when_the_deadline_caused_it() -> None:
    """ORA-01013 is CANCELLED, or TIMEOUT when the provider's deadline broke the call."""
    assert classify(_ora(1013)) is _P.CANCELLED
    assert classify(_ora(1013), state=ExecutionState(timed_out=True)) is _P.TIMEOUT
    assert classify(_ora(1013), state=ExecutionState(cancelled=True)) is _P.CANCELLED


def test_unknown_codes_and_foreign_exceptions() -> None:
    """An unnamed Oracle Text error is TEXT_INDEX_UNAVAILABLE; anything else unknown UNKNOWN."""
    assert classify(_ora(20000, "Oracle Text error:\nDRG-99999: new")) is _P.TEXT_INDEX_UNAVAILABLE
    assert classify(_ora(12345)) is _P.UNKNOWN
    assert classify(ValueError("ORA-00942")) is _P.UNKNOWN
