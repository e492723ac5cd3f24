"""Publication asks each source kind's identifier check; a kind that states none is unchanged."""

from __future__ import annotations

import pytest

from esra.core.admin import Role
from esra.core.providers import IdentifierCheck, installed_identifier_checks
from esra.mysql._factory import mysql_identifier_problem
from esra.oracle._identifiers import oracle_identifier_problem
from esra.postgres._factory import postgres_identifier_problem
from esra.sqlite._factory import sqlite_identifier_problem
from esra.sqlserver._factory import sqlserver_identifier_problem
from tests.core.admin.test_chain import STEPS, Admin, holder
from tests.core.factories import TENANT


async def _chain(h: Admin) -> None:
    roles = (
        Role.SECURITY_MANAGE,
        Role.ESRA_DATA_MANAGE,
        Role.GOVERNANCE_MANAGE,
        Role.ESRA_EXPOSURE_MANAGE,
    )
    for step, role in zip(STEPS, roles, strict=True):
        await step(h, holder(role), TENANT)


async def test_a_kind_whose_factory_states_no_check_publishes_as_before() -> None:
    # make_source's kind is in_memory, which no installed factory checks: relation tbl_m_1.
    h = Admin()
    await _chain(h)
    assert await h.runtime.snapshot(TENANT) is not None


def test_postgres_refuses_nul_and_names_it_would_truncate() -> None:
    assert postgres_identifier_problem('hr" "x') is None  # PostgreSQL doubles the quote
    # Truncated alike when created and when named: a long name reaches the same object.
    assert postgres_identifier_problem("x" * 64) is None
    assert postgres_identifier_problem("a\x00b") is not None


def test_sqlserver_refuses_names_over_128_characters() -> None:
    assert sqlserver_identifier_problem("é" * 128) is None
    assert sqlserver_identifier_problem("x" * 129) is not None
    assert sqlserver_identifier_problem("\U0001f600" * 65) is not None  # 130 UTF-16 units


def test_mysql_refuses_what_even_a_quoted_identifier_cannot_hold() -> None:
    assert mysql_identifier_problem("hr` `x") is None  # MySQL doubles the backtick
    assert mysql_identifier_problem("é" * 64) is None
    assert mysql_identifier_problem("x" * 65) is not None
    assert mysql_identifier_problem("a\x00b") is not None
    assert mysql_identifier_problem("emoji \U0001f600") is not None
    assert mysql_identifier_problem("trailing ") is not None
    assert mysql_identifier_problem(" leading") is None


def test_the_installed_mysql_and_mariadb_factories_state_the_check() -> None:
    checks = installed_identifier_checks()
    assert checks["mysql"] is mysql_identifier_problem
    assert checks["mariadb"] is mysql_identifier_problem


ENGINE_CHECKS = (
    sqlite_identifier_problem,
    postgres_identifier_problem,
    mysql_identifier_problem,
    sqlserver_identifier_problem,
    oracle_identifier_problem,
)


@pytest.mark.parametrize("check", ENGINE_CHECKS, ids=lambda check: check.__name__)
def test_every_engine_refuses_a_name_no_statement_can_encode(check: IdentifierCheck) -> None:
    """A lone surrogate (a JSON ``"\\udc80"`` decodes to one) has no UTF-8 or UTF-16 form,
    so no driver can send it; the SQL Server and Oracle checks raised UnicodeEncodeError
    measuring such a name instead of answering."""
    for name in ("body\udc80", "\ud800", "a\udfffb"):
        problem = check(name)
        assert problem is not None
        assert "surrogate" in problem
    assert check("body é 中文") is None


def test_sqlite_refuses_nul_only_among_encodable_names() -> None:
    assert sqlite_identifier_problem('a "b"; DROP TABLE x --') is None
    assert sqlite_identifier_problem("x" * 1000) is None
    assert sqlite_identifier_problem("a\x00b") is not None
