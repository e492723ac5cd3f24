"""Publication asks each source kind's identifier check; a kind that states none is unchanged."""

from __future__ import annotations

from esra.core.admin import Role
from esra.postgres._factory import postgres_identifier_problem
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
