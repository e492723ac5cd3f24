"""SourceConnection: one source's template, resolved anew for every connection opened."""

from __future__ import annotations

import asyncio

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
    """``target()`` keeps its first resolution for the engine's checks of its options."""
    secrets = _Vault("first")
    source = _source(secrets)
    kept = await source.target()
    secrets.value = "second"
    assert await source.target() is kept
    assert kept.password == "first"


async def test_nothing_is_kept_until_a_resolution_succeeds() -> None:
    """A failed ``target()`` keeps nothing: the next call resolves again."""
    secrets = _Vault()
    source = _source(secrets)
    with pytest.raises(ProviderError) as failed:
        await source.target()
    assert failed.value.code is ProviderErrorCode.SECRET_UNRESOLVED
    secrets.value = "now-there"
    assert (await source.target()).password == "now-there"


async def test_a_worker_threads_opener_resolves_the_secret_as_it_is_now() -> None:
    """A connection opened on a worker thread logs in with the secret rotated since
    ``target()``, resolved on the loop that awaited it."""
    secrets = _Vault("first")
    source = _source(secrets)
    await source.target()
    secrets.value = "second"
    assert (await asyncio.to_thread(source.resolve_from_thread)).password == "second"


async def test_a_worker_thread_sees_a_host_taken_off_the_allowlist() -> None:
    """The allowlist is asked again for every connection a thread opens."""

    class _Revocable:
        allowed = True

        async def is_allowed(self, tenant_id: str, host: str, port: int) -> bool:
            return self.allowed

    allowlist = _Revocable()
    source = SourceConnection(
        TEMPLATE, tenant_id="tenant-a", secrets=_Vault("pw"), allowlist=allowlist, schemes=SCHEMES
    )
    await source.target()
    allowlist.allowed = False
    with pytest.raises(ProviderError) as raised:
        await asyncio.to_thread(source.resolve_from_thread)
    assert raised.value.code is ProviderErrorCode.HOST_NOT_ALLOWED


async def test_a_secret_store_that_does_not_answer_is_a_timeout() -> None:
    """A hung secret store fails the thread's connection as TIMEOUT instead of holding it."""
    never = asyncio.Event()

    class _Hung(_Vault):
        async def resolve(self, tenant_id: str, reference: str) -> str:
            await never.wait()
            return "never"

    source = _source(_Vault("first"))
    await source.target()
    source._secrets = _Hung()
    with pytest.raises(ProviderError) as raised:
        await asyncio.to_thread(source.resolve_from_thread, 0.05)
    assert raised.value.code is ProviderErrorCode.TIMEOUT


async def test_no_thread_resolution_without_a_loop_or_on_the_loop_itself() -> None:
    """Before any ``target()`` there is no loop to resolve on; on the loop's own thread the
    call would wait on itself: both are UNKNOWN, at once."""
    source = _source(_Vault("first"))
    with pytest.raises(ProviderError) as before:
        await asyncio.to_thread(source.resolve_from_thread)
    assert before.value.code is ProviderErrorCode.UNKNOWN
    await source.target()
    with pytest.raises(ProviderError) as on_loop:
        source.resolve_from_thread()
    assert on_loop.value.code is ProviderErrorCode.UNKNOWN


async def test_a_host_off_the_allowlist_resolves_to_nothing() -> None:
    """The allowlist is asked on every resolution: another host is HOST_NOT_ALLOWED."""
    source = _source(_Vault(), "postgresql://reader@elsewhere:6432/sales")
    with pytest.raises(ProviderError) as raised:
        await source.target()
    assert raised.value.code is ProviderErrorCode.HOST_NOT_ALLOWED
    assert source.template == "postgresql://reader@elsewhere:6432/sales"
