"""A mapping naming what SQLite cannot hold is refused when it is published, not searched.

esra-sqlite's factory states which names SQLite cannot hold (``sqlite_identifier_problem``):
a NUL, which Python's ``sqlite3`` refuses in any statement, and a lone surrogate, which no
statement's text can encode. Before, such a mapping published and every search of it failed.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from esra.core._outbound_allowlist import ConfiguredHostAllowlist
from esra.core.admin import InMemorySecretVault, Role
from esra.core.codes import ErrorCode
from esra.core.providers import (
    ProviderRegistry,
    ProviderRequest,
    UnholdableIdentifierError,
    installed_identifier_checks,
)
from esra.sqlite._factory import open_sqlite_provider, sqlite_identifier_problem
from tests.core.admin.test_chain import STEPS, Admin, holder
from tests.core.factories import TENANT, make_capability, make_field, make_mapping, make_source

UNHOLDABLE = ("body\x00text", "body\udc80")


async def _publish(h: Admin, column: str) -> None:
    """The chain's four steps for one ``sqlite`` source whose body field names ``column``."""
    source = make_source("s-1", provider_kind="sqlite")
    mapping = make_mapping(fields=(make_field("title"), make_field("body", column=column)))
    await STEPS[0](h, holder(Role.SECURITY_MANAGE), TENANT)
    data = holder(Role.ESRA_DATA_MANAGE)
    await h.data.model_source(data, TENANT, source, [mapping])
    await h.data.define_capability(data, TENANT, make_capability(["s-1"]))
    await STEPS[2](h, holder(Role.GOVERNANCE_MANAGE), TENANT)
    await STEPS[3](h, holder(Role.ESRA_EXPOSURE_MANAGE), TENANT)


@pytest.mark.parametrize("column", UNHOLDABLE, ids=["nul", "lone-surrogate"])
def test_sqlite_cannot_be_sent_such_a_name(tmp_path: Path, column: str) -> None:
    """What the check stands for: the driver refuses the statement naming it."""
    connection = sqlite3.connect(tmp_path / "x.db")
    try:
        quoted = '"' + column.replace('"', '""') + '"'
        with pytest.raises((sqlite3.ProgrammingError, UnicodeEncodeError)):
            connection.execute(f"CREATE TABLE t ({quoted} TEXT)")
    finally:
        connection.close()


@pytest.mark.parametrize("column", UNHOLDABLE, ids=["nul", "lone-surrogate"])
async def test_publishing_a_name_sqlite_cannot_hold_is_refused(column: str) -> None:
    h = Admin()
    with pytest.raises(UnholdableIdentifierError) as raised:
        await _publish(h, column)
    assert raised.value.code is ErrorCode.ESRA_CONFIGURATION_INVALID
    assert "'s-1'" in str(raised.value)
    assert "field 'body'" in str(raised.value)
    assert column not in str(raised.value)
    assert await h.runtime.snapshot(TENANT) is None


async def test_a_name_sqlite_can_hold_publishes() -> None:
    h = Admin()
    await _publish(h, 'a "quoted"; DROP TABLE x -- é 中文')
    assert await h.runtime.snapshot(TENANT) is not None


def test_opening_a_source_sqlite_cannot_name_is_refused() -> None:
    # A snapshot that reached the host unpublished (esra serve --config's file).
    request = ProviderRequest(
        source=make_source("s-1", provider_kind="sqlite"),
        secrets=InMemorySecretVault(),
        allowlist=ConfiguredHostAllowlist(),
        mappings=(make_mapping(relation="docs\x00"),),
    )
    with pytest.raises(UnholdableIdentifierError):
        ProviderRegistry({"sqlite": open_sqlite_provider}).open(request)


def test_both_installed_sqlite_kinds_state_the_check() -> None:
    checks = installed_identifier_checks()
    assert checks["sqlite"] is sqlite_identifier_problem
    assert checks["sqlite-document-store"] is sqlite_identifier_problem
