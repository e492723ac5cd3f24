"""Connection templates: parsed strictly, secrets per tenant, hosts allowlisted per tenant."""

from __future__ import annotations

import pytest

from esra.core.codes import ProviderErrorCode
from esra.core.exceptions import ProviderError
from esra.core.testing import InMemorySecretStore, StaticHostAllowlist
from esra.sql._connection import ConnectionTarget, ConnectionTemplate, resolve_connection

SCHEMES = {"postgresql": 5432, "postgres": 5432}
TEMPLATE = "postgresql://reader:${secret:sales-pw}@db.internal:6432/sales?sslmode=require"
SECRETS = InMemorySecretStore({("tenant-a", "sales-pw"): "s3cr3t"})
ALLOW = StaticHostAllowlist([("tenant-a", "db.internal", 6432), ("tenant-b", "db.internal", 6432)])


async def _resolve(template: str = TEMPLATE, tenant: str = "tenant-a") -> ConnectionTarget:
    return await resolve_connection(
        template, tenant_id=tenant, secrets=SECRETS, allowlist=ALLOW, schemes=SCHEMES
    )


async def test_a_template_resolves_its_secret_for_the_owning_tenant() -> None:
    """Placeholders become the tenant's secret; host, port, database and options stay."""
    target = await _resolve()
    assert target.host == "db.internal"
    assert target.port == 6432
    assert target.database == "sales"
    assert target.user == "reader"
    assert target.password == "s3cr3t"
    assert target.option("sslmode") == "require"
    assert "s3cr3t" not in repr(target)


async def test_another_tenants_reference_does_not_resolve() -> None:
    """Tenant B naming tenant A's secret reference gets SECRET_UNRESOLVED."""
    with pytest.raises(ProviderError) as raised:
        await _resolve(tenant="tenant-b")
    assert raised.value.code is ProviderErrorCode.SECRET_UNRESOLVED


async def test_a_host_allowlisted_for_another_tenant_is_not_allowed() -> None:
    """The allowlist is consulted with the tenant id: A's host is not C's."""
    with pytest.raises(ProviderError) as raised:
        await _resolve(tenant="tenant-c")
    assert raised.value.code is ProviderErrorCode.HOST_NOT_ALLOWED


async def test_the_host_is_checked_before_any_secret_is_read() -> None:
    """A disallowed host costs no secret lookup."""

    class Exploding:
        async def resolve(self, tenant_id: str, reference: str) -> str:
            raise AssertionError("secret read before the host check")

    with pytest.raises(ProviderError) as raised:
        await resolve_connection(
            TEMPLATE.replace("db.internal", "evil.example"),
            tenant_id="tenant-a",
            secrets=Exploding(),
            allowlist=ALLOW,
            schemes=SCHEMES,
        )
    assert raised.value.code is ProviderErrorCode.HOST_NOT_ALLOWED


async def test_an_allowlist_that_fails_is_a_denial() -> None:
    """An allowlist that cannot answer fails closed."""

    class Broken:
        async def is_allowed(self, tenant_id: str, host: str, port: int) -> bool:
            raise RuntimeError("allowlist down")

    with pytest.raises(ProviderError) as raised:
        await resolve_connection(
            TEMPLATE, tenant_id="tenant-a", secrets=SECRETS, allowlist=Broken(), schemes=SCHEMES
        )
    assert raised.value.code is ProviderErrorCode.HOST_NOT_ALLOWED


@pytest.mark.parametrize(
    "template",
    [
        "not a url",
        "mysql://reader@db.internal/sales",  # scheme not accepted here
        "postgresql://reader@/sales",  # no host
        "postgresql://reader@${secret:host}/sales",  # host from a secret
        "postgresql://reader@db.internal:99999/sales",  # bad port
        "postgresql://reader@db.internal:abc/sales",
        "postgresql://reader:${secret:}@db.internal/sales",  # empty reference
        "postgresql://reader:${oops}@db.internal/sales",  # not a secret placeholder
        "postgresql://reader@db.internal/sales#frag",
        "postgresql://reader@db.internal/${secret:db}",  # database from a secret
        "postgresql://reader@db.internal/sales?${secret:k}=v",
        "postgresql://reader@db_internal!/sales",
    ],
)
async def test_malformed_templates_are_classified(template: str) -> None:
    """Anything malformed is CONNECTION_TEMPLATE_INVALID, never a crash or a connection."""
    with pytest.raises(ProviderError) as raised:
        await _resolve(template)
    assert raised.value.code is ProviderErrorCode.CONNECTION_TEMPLATE_INVALID


@pytest.mark.parametrize(
    "template",
    [
        "postgresql://${secret:env:PGUSER}:${secret:file:/run/secrets/pw}@db.internal:6432/sales",
        "postgresql://${secret%3Aenv%3APGUSER}:${secret%3Afile%3A%2Frun%2Fsecrets%2Fpw}"
        "@db.internal:6432/sales",
    ],
)
async def test_references_with_colons_and_slashes_need_no_percent_encoding(
    template: str,
) -> None:
    """``env:`` and ``file:`` references hold ":" and "/": written plainly in the user name
    or the password they still resolve there, never splitting the URL (encoded, as before,
    they resolve the same)."""
    secrets = InMemorySecretStore(
        {("tenant-a", "env:PGUSER"): "reader", ("tenant-a", "file:/run/secrets/pw"): "pw"}
    )
    target = await resolve_connection(
        template, tenant_id="tenant-a", secrets=secrets, allowlist=ALLOW, schemes=SCHEMES
    )
    assert (target.user, target.password, target.host, target.port, target.database) == (
        "reader",
        "pw",
        "db.internal",
        6432,
        "sales",
    )


@pytest.mark.parametrize(
    "template",
    [
        "postgresql://reader@${secret:env:HOST}/sales",  # still never the host
        "postgresql://reader@db.internal/${secret:file:/db}",  # nor the database
        "postgresql://reader@db.internal:${secret:env:PORT}/sales",  # nor the port
    ],
)
async def test_plain_references_still_never_name_host_port_or_database(template: str) -> None:
    with pytest.raises(ProviderError) as raised:
        await _resolve(template)
    assert raised.value.code is ProviderErrorCode.CONNECTION_TEMPLATE_INVALID


def test_the_default_port_comes_from_the_scheme() -> None:
    """A template without a port gets the engine's default."""
    parsed = ConnectionTemplate.parse("postgres://u@Db.Internal/x", schemes=SCHEMES)
    assert (parsed.host, parsed.port) == ("db.internal", 5432)
