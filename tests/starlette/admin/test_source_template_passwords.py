"""PUT /sources/{id} refuses a connection template holding a literal password (422).

Configuration holds secret references only (docs/secrets.md): the password never reaches
the draft, its history or an ESRA_DATA_READ holder's GET /config, and the refusal does not
quote it back.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from esra.core._config.converter import CONVERTER
from esra.core.codes import AuditEvent
from tests.core.factories import make_source
from tests.starlette._world import TENANT_A
from tests.starlette.admin._host import ADMIN, open_admin_host, token

pytestmark = pytest.mark.asyncio

PASSWORD = "hunter2-literal-password"


async def test_a_literal_password_in_a_connection_template_is_refused(tmp_path: Path) -> None:
    security = token("SECURITY_MANAGE", subject="security")
    modeller = token("ESRA_DATA_MANAGE", subject="modeller")
    reader = token("ESRA_DATA_READ", subject="reader")
    source = CONVERTER.unstructure(
        make_source(
            "s-pg",
            tenant_id=TENANT_A,
            provider_kind="postgres",
            connection_ref=f"postgresql://${{secret:pg-user}}:{PASSWORD}@db.internal:5432/sales",
        )
    )
    del source["tenant_id"]
    async with open_admin_host(tmp_path) as host:
        async with host.client(security) as client:
            written = await client.put(f"{ADMIN}/secrets/pg-user", json={"value": "reader"})
            assert written.status_code == 200
        async with host.client(modeller) as client:
            modelled = await client.put(f"{ADMIN}/sources/s-pg", json={"source": source})
        async with host.client(reader) as client:
            draft = (await client.get(f"{ADMIN}/config")).text
        records = [r for r in host.audit.records if r.event is AuditEvent.ADMIN_SOURCE_MODEL]

    assert modelled.status_code == 422, modelled.text
    assert modelled.json()["error"]["code"] == "ESRA_CONFIGURATION_INVALID", modelled.text
    assert PASSWORD not in modelled.text
    assert PASSWORD not in draft
    assert [r.outcome for r in records] == ["rejected"]
    assert PASSWORD not in repr(records)
