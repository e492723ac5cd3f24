"""SourceConnection: one source's template, resolved anew or once and then kept."""

from __future__ import annotations

import pytest

from esra.core.codes import ProviderErrorCode
from esra.core.exceptions import ProviderError
from esra.core.testing import StaticHostAllowlist
from esra.sql import SourceConnection

SCHEMES = {"postgresql": 5432}
TEMPLATE = "postgresql://reader:${secret:pw}@db.internal:6432/sales"
ALLOW = StaticHostAllowlist([("tenant-a", "db.internal", 6432)])


class _Vault:
    """One secret for tenant-a, rotated by assigning ``value``; ``None`` resolves nothing."""

    def __init__(self, value: str | None = None) -> None:
        self.value = value

    async def resolve(self, tenant_id: str, reference: str) -> str:
        if self.value is None or (tenant_id, reference) != ("tenant-a", "pw"):
            raise ProviderError(ProviderErrorCode.SECRET_UNRESOLVED)
        return self.value


def _source(secrets: _Vault, template: str = TEMPLATE) -> SourceConnection:
    return SourceConnection(
        template, tenant_id="tenant-a", secrets=secrets, allowlist=ALLOW, schemes=SCHEMES
    )


async def test_resolve_reads_the_secret_anew_every_time() -> None:
    """A secret rotated since is what the next resolution logs in with."""
    secrets = _Vault("first")
    source = _source(secrets)
    assert (await source.resolve()).password == "first"
    secrets.value = "second"
    assert (await source.resolve()).password == "second"


async def test_target_is_resolved_once_and_kept() -> None:
    """``target()`` keeps its first resolution; ``resolved`` hands the same one out."""
    secrets = _Vault("first")
    source = _source(secrets)
    kept = await source.target()
    secrets.value = "second"
    assert await source.target() is kept
    assert source.resolved is kept
    assert kept.password == "first"


async def test_nothing_is_kept_until_a_resolution_succeeds() -> None:
    """Before ``target()`` succeeds, ``resolved`` is UNKNOWN and a failure is not kept."""
    secrets = _Vault()
    source = _source(secrets)
    with pytest.raises(ProviderError) as raised:
        _ = source.resolved
    assert raised.value.code is ProviderErrorCode.UNKNOWN
    with pytest.raises(ProviderError) as failed:
        await source.target()
    assert failed.value.code is ProviderErrorCode.SECRET_UNRESOLVED
    secrets.value = "now-there"
    assert (await source.target()).password == "now-there"


async def test_a_host_off_the_allowlist_resolves_to_nothing() -> None:
    """The allowlist is asked on every resolution: another host is HOST_NOT_ALLOWED."""
    source = _source(_Vault(), "postgresql://reader@elsewhere:6432/sales")
    with pytest.raises(ProviderError) as raised:
        await source.target()
    assert raised.value.code is ProviderErrorCode.HOST_NOT_ALLOWED
    assert source.template == "postgresql://reader@elsewhere:6432/sales"
