"""A source's connection template names its credentials; it never holds a password.

The check is esra-core's (``check_no_literal_password``): the admin chain refuses such a
source when it is modelled, publication refuses a draft that still holds one (a workspace
stored before the check existed), and the settings loader calls the same function.
"""

from __future__ import annotations

import attrs
import pytest

from esra.core._admin.publication import publishable_snapshot
from esra.core._admin.store import ConfigChange
from esra.core.admin import Role
from esra.core.codes import AuditEvent, ErrorCode
from esra.core.config import check_no_literal_password
from esra.core.exceptions import ConfigurationError
from tests.core.admin.test_chain import SECRET_REF, Admin, holder, run_until
from tests.core.factories import SLUG, TENANT, make_exposure, make_mapping, make_source

PASSWORD = "hunter2-literal-password"

REFUSED = [
    f"postgresql://reader:{PASSWORD}@db.internal:5432/sales",
    f"postgresql://${{secret:{SECRET_REF}}}:{PASSWORD}@db.internal/sales",
    f"postgresql://${{secret:env:PGUSER}}:{PASSWORD}@db.internal/sales",
    f"postgresql://${{secret:file:/run/secrets/pg-user}}:{PASSWORD}@db.internal/sales",
    f"postgresql://${{secret%3Aenv%3APGUSER}}:{PASSWORD}@db.internal/sales",
    f"postgresql://reader:${{secret:pg}}{PASSWORD}@db.internal/sales",
    f"mysql://reader:{PASSWORD}@db.internal:3306/sales?ssl=true",
    f"//reader:{PASSWORD}@db.internal/sales",
    f"postgresql://reader:{PASSWORD}@[db.internal/sales",  # malformed: judged all the same
    # A credential in the query string: any option whose name holds password, passwd, pwd,
    # passphrase, secret or token (case and separators aside) must be one whole reference.
    f"postgresql://reader:${{secret:pg}}@db.internal/sales?sslkey=/k&sslpassword={PASSWORD}",
    f"postgresql://reader@db.internal/sales?password={PASSWORD}",
    f"postgresql://reader@db.internal/sales?PassWord={PASSWORD}",
    f"postgresql://reader@db.internal/sales?ssl%70assword={PASSWORD}",  # the name encoded
    f"mysql://reader@db.internal/sales?ssl_key_passwd={PASSWORD}",
    f"mysql://reader@db.internal/sales?ssl-key-passphrase={PASSWORD}",
    f"sqlserver://reader@db.internal/sales?PWD={PASSWORD}",
    f"oracle://reader@db.internal/sales?client_secret={PASSWORD}",
    f"oracle://reader@db.internal/sales?access_token={PASSWORD}",
    f"postgresql://reader@db.internal/sales?sslpassword=${{secret:pg}}{PASSWORD}",
    f"postgresql://reader@db.internal/sales?sslpassword={PASSWORD}${{secret:pg}}",
    f"postgresql://reader@db.internal/sales?sslpassword=${{secret:a}}${{secret:b}}{PASSWORD}",
    f"postgresql://reader@db.internal/sales?sslmode=require&sslpassword={PASSWORD}#frag",
    f"postgresql://reader@db.internal/sales?sslpassword=+{PASSWORD}",
    f"postgresql://reader@db.internal/sales?sslpassword={PASSWORD}&sslpassword=${{secret:pg}}",
    f"  postgresql://reader@db.internal/sales?sslpass\tword={PASSWORD}",  # tab: dropped
    # A keyword/value string connects through no provider, but configuration keeps it.
    f"host=db.internal user=reader password={PASSWORD} dbname=sales",
    f"host=db.internal password = '{PASSWORD} with spaces'",
    f"Server=db.internal;Database=sales;User Id=reader;Password={PASSWORD};",
    f"Server=db.internal;PWD={{{PASSWORD}}}",
    f"host=db.internal sslpassword=${{secret:pg}}{PASSWORD}",
    # A "reference" longer than any name the resolver takes is literal text: the bound is
    # what keeps the check linear in the template's length.
    f"postgresql://reader:${{secret:{'p' * 1100}}}@db.internal/sales",
]
ACCEPTED = [
    "postgresql://reader:${secret:pg}@db.internal:5432/sales?sslmode=require",
    "postgresql://${secret:env:PGUSER}:${secret:file:/run/secrets/pg-password}@db.internal/x",
    "postgresql://${secret%3Aenv%3APGUSER}:${secret%3Aenv%3APGPW}@db.internal/x",
    "postgresql://reader@db.internal/sales",
    "postgresql://reader:@db.internal/sales",
    "postgresql://db.internal/sales?user=reader",
    "secret://s-1",
    "sales.db",
    "postgresql://reader@db.internal/sales?sslkey=/k&sslpassword=${secret:key-pass}",
    "postgresql://reader@db.internal/sales?sslpassword=${secret:file:/run/secrets/key-pass}",
    "postgresql://reader@db.internal/sales?sslpassword=${secret%3Aenv%3AKEY_PASS}",
    "postgresql://reader@db.internal/sales?sslpassword=%24%7Bsecret%3Aenv%3AKEY_PASS%7D",
    "postgresql://reader@db.internal/sales?sslpassword=",  # empty: no secret at all
    "postgresql://reader@db.internal/sales?sslmode=verify-full&sslrootcert=/etc/esra/ca.pem",
    "postgresql://reader@db.internal/sales?application_name=password-reset",  # a value only
    "mysql://reader@db.internal/sales?ssl_ca=/etc/esra/ca.pem&connect_timeout=5",
    "host=db.internal user=reader password=${secret:pg} dbname=sales",
    "Server=db.internal;User Id=reader;Password={${secret:env:MSSQL_PW}};",
    "host=db.internal application_name=password-reset",
]


@pytest.mark.parametrize("template", REFUSED)
def test_a_literal_password_is_refused_without_echoing_it(template: str) -> None:
    with pytest.raises(ConfigurationError, match="literal password") as refused:
        check_no_literal_password(make_source("s-pg", connection_ref=template))
    assert refused.value.code is ErrorCode.ESRA_CONFIGURATION_INVALID
    assert "'s-pg'" in str(refused.value)
    assert PASSWORD not in str(refused.value)


@pytest.mark.parametrize("template", ACCEPTED)
def test_secret_references_and_no_password_are_accepted(template: str) -> None:
    check_no_literal_password(make_source("s-pg", connection_ref=template))


@pytest.mark.asyncio
async def test_modelling_a_source_with_a_literal_password_is_rejected_and_audited() -> None:
    h = Admin()
    await run_until(h, 1)
    before = await h.current(TENANT)
    template = f"postgresql://${{secret:{SECRET_REF}}}:{PASSWORD}@db.internal:5432/sales"
    source = make_source("s-1", connection_ref=template)

    with pytest.raises(ConfigurationError, match="literal password") as refused:
        await h.data.model_source(holder(Role.ESRA_DATA_MANAGE), TENANT, source, [make_mapping()])

    assert refused.value.code is ErrorCode.ESRA_CONFIGURATION_INVALID
    assert PASSWORD not in str(refused.value)
    assert await h.current(TENANT) == before
    rejection = h.audit.records[-1]
    assert (rejection.event, rejection.outcome) == (AuditEvent.ADMIN_SOURCE_MODEL, "rejected")
    assert PASSWORD not in repr(rejection)


@pytest.mark.asyncio
async def test_publication_refuses_a_stored_draft_holding_a_literal_password() -> None:
    """A workspace saved before modelling checked templates cannot be published."""
    h = Admin()
    await run_until(h, 3)
    publisher = holder(Role.ESRA_EXPOSURE_MANAGE)
    exposure = make_exposure(published=False, source_subset=frozenset({"s-1"}))
    await h.exposures.bind_exposure(publisher, TENANT, exposure)
    current = await h.current(TENANT)
    # Its user is the written secret, so only the literal password stands in the way.
    template = f"postgresql://${{secret:{SECRET_REF}}}:{PASSWORD}@db.internal/x"
    leaked = make_source("s-1", connection_ref=template)
    snapshot = attrs.evolve(current.snapshot, sources=(leaked,))
    stored = current.next(snapshot=snapshot)
    change = ConfigChange(
        tenant_id=TENANT,
        version=stored.version,
        subject="before-the-fix",
        at=h.clock.now(),
        action=AuditEvent.ADMIN_SOURCE_MODEL.value,
        target="s-1",
    )
    await h.store.save(stored, expected_version=current.version, change=change)

    with pytest.raises(ConfigurationError, match="literal password") as direct:
        publishable_snapshot(await h.current(TENANT), SLUG)
    assert PASSWORD not in str(direct.value)
    with pytest.raises(ConfigurationError, match="literal password"):
        await h.exposures.publish(publisher, TENANT, SLUG)
    assert await h.runtime.snapshot(TENANT) is None
    rejection = h.audit.records[-1]
    assert (rejection.event, rejection.outcome) == (AuditEvent.ADMIN_EXPOSURE_PUBLISH, "rejected")
    assert PASSWORD not in repr(rejection)
