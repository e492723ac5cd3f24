"""A value the column's type cannot take is the query's fault, never the source's.

No Oracle runs here: the errors are python-oracledb's own exception objects for the ORA
numbers Oracle documents for these failures. A filter value or claim that a NUMBER or DATE
column cannot take (a TEXT field over a NUMBER column, say) fails the same on every attempt;
as UNKNOWN it counted against the source's breaker, so one caller's values could take the
source away from every caller of the tenant. PostgreSQL classifies its class 22 (data
exceptions) as SYNTAX_ERROR for the same reason.
"""

from __future__ import annotations

import oracledb
import pytest
from oracledb import errors as oracle_errors

from esra.core.codes import ProviderErrorCode
from esra.oracle._errors import classify


def _ora(code: int, text: str = "something") -> oracledb.Error:
    return oracledb.DatabaseError(oracle_errors._Error(f"ORA-{code:05d}: {text}", code=code))


@pytest.mark.parametrize("code", [1722, 1858, 1861, 1843, 1847, 1830, 1841, 1426, 1460, 1489])
def test_a_value_the_column_cannot_take_is_a_syntax_error(code: int) -> None:
    """Each data-conversion number is SYNTAX_ERROR, which the breaker does not count."""
    assert classify(_ora(code, "the value 'secret' is no number")) is (
        ProviderErrorCode.SYNTAX_ERROR
    )


def _text_error(*codes: int, drg: int) -> oracledb.Error:
    message = "\n".join(f"ORA-{code:05d}: wrapper" for code in codes)
    message += f"\nDRG-{drg}: query token too long on line 1 on column 3"
    return oracledb.DatabaseError(oracle_errors._Error(message, code=codes[0]))


@pytest.mark.parametrize("codes", [(29902, 20000), (20000,), (20000, 6512)])
def test_a_query_token_over_256_bytes_is_the_querys_fault(codes: tuple[int, ...]) -> None:
    """DRG-50943: one token of a term is over Oracle Text's 256 bytes (86 CJK characters
    without a space are, within the default 200-character term). Under ORA-29902 it was
    already SYNTAX_ERROR; raised as ORA-20000 alone (CONTAINS evaluated functionally) it fell
    to TEXT_INDEX_UNAVAILABLE, counted against the breaker."""
    assert classify(_text_error(*codes, drg=50943)) is ProviderErrorCode.SYNTAX_ERROR
