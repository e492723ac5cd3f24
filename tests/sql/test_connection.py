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


class _RecordingStore:
    """Answers every reference with a value and records what it was asked, in order."""

    def __init__(self, refused: str | None = None) -> None:
        self.asked: list[tuple[str, str]] = []
        self._refused = refused

    async def resolve(self, tenant_id: str, reference: str) -> str:
        self.asked.append((tenant_id, reference))
        if reference == self._refused:
            raise ProviderError(ProviderErrorCode.SECRET_UNRESOLVED)
        return "value-of-" + reference


async def _resolve_with_keys(template: str, store: _RecordingStore) -> ConnectionTarget:
    return await resolve_connection(
        template,
        tenant_id="tenant-a",
        secrets=store,
        allowlist=ALLOW,
        schemes=SCHEMES,
        private_file_options=frozenset({"sslkey"}),
    )


async def test_a_private_file_option_is_judged_as_a_file_secret_of_the_tenant() -> None:
    """The path a key option names is asked of the secret store as ``file:PATH``, with the
    source's tenant, after any reference inside it is substituted; the option keeps the path."""
    store = _RecordingStore()
    target = await _resolve_with_keys(
        "postgresql://db.internal:6432/sales?sslcert=/pki/c.crt&sslkey=/run/secrets/a/c.key"
        "&sslrootcert=/pki/root.crt",
        store,
    )
    assert store.asked == [("tenant-a", "file:/run/secrets/a/c.key")]
    assert target.option("sslkey") == "/run/secrets/a/c.key"

    store = _RecordingStore()
    await _resolve_with_keys(
        "postgresql://db.internal:6432/sales?sslkey=${secret:key-path}&sslkey=", store
    )
    assert store.asked == [("tenant-a", "key-path"), ("tenant-a", "file:value-of-key-path")]


async def test_a_private_file_the_tenant_may_not_read_fails_the_resolution() -> None:
    store = _RecordingStore(refused="file:/home/other-tenant/c.key")
    with pytest.raises(ProviderError) as raised:
        await _resolve_with_keys(
            "postgresql://db.internal:6432/sales?sslkey=/home/other-tenant/c.key", store
        )
    assert raised.value.code is ProviderErrorCode.SECRET_UNRESOLVED


async def test_a_secret_store_failing_on_a_private_file_is_secret_unresolved() -> None:
    class Broken:
        async def resolve(self, tenant_id: str, reference: str) -> str:
            raise OSError("/home/other-tenant/c.key: permission denied")

    with pytest.raises(ProviderError) as raised:
        await resolve_connection(
            "postgresql://db.internal:6432/sales?sslkey=/k",
            tenant_id="tenant-a",
            secrets=Broken(),
            allowlist=ALLOW,
            schemes=SCHEMES,
            private_file_options=frozenset({"sslkey"}),
        )
    assert raised.value.code is ProviderErrorCode.SECRET_UNRESOLVED
    assert "permission" not in str(raised.value)
