"""``check_put`` refuses exactly what ``put`` refuses, and never stores anything.

The admin chain asks ``check_put`` before it records a secret write, so a check weaker than
the write would let the workspace list a secret that was never stored.
"""

from __future__ import annotations

from typing import Any

import pytest

from esra.core.codes import ErrorCode
from esra.core.exceptions import ConfigurationError, ProviderError
from esra.core.secrets import (
    DENY_ALL,
    MAX_SECRET_BYTES,
    EncryptedSecretStore,
    KeyEncryptionKeys,
    ReferenceSecretResolver,
    RoutingSecretStore,
)
from esra.core.testing import InMemorySecretTable

pytestmark = pytest.mark.asyncio

TENANT = "tenant-a"
REFERENCE = "sales-db"


def _stores() -> list[EncryptedSecretStore | RoutingSecretStore]:
    stored = EncryptedSecretStore(InMemorySecretTable(), KeyEncryptionKeys.generate("k1"))
    routing = RoutingSecretStore(
        stored=EncryptedSecretStore(InMemorySecretTable(), KeyEncryptionKeys.generate("k1")),
        external=ReferenceSecretResolver({}, default=DENY_ALL),
    )
    return [stored, routing]


REFUSED_BY_EVERY_STORE = [
    pytest.param("", REFERENCE, "pw", id="empty-tenant"),
    pytest.param(TENANT, "", "pw", id="empty-reference"),
    pytest.param(TENANT, REFERENCE, b"pw", id="non-string-value"),
    pytest.param(TENANT, REFERENCE, "x" * (MAX_SECRET_BYTES + 1), id="oversized-value"),
    pytest.param(TENANT, REFERENCE, "é" * (MAX_SECRET_BYTES // 2 + 1), id="oversized-in-utf8"),
]


@pytest.mark.parametrize(("tenant_id", "reference", "value"), REFUSED_BY_EVERY_STORE)
async def test_check_put_refuses_what_put_refuses(
    tenant_id: str, reference: str, value: Any
) -> None:
    for store in _stores():
        with pytest.raises(ConfigurationError) as checked:
            await store.check_put(tenant_id, reference, value)
        with pytest.raises(ConfigurationError) as written:
            await store.put(tenant_id, reference, value)
        assert checked.value.code is ErrorCode.ESRA_CONFIGURATION_INVALID
        assert (type(checked.value), str(checked.value)) == (
            type(written.value),
            str(written.value),
        )


@pytest.mark.parametrize("reference", ["env:ESRA_SECRET_PG", "file:/run/secrets/pg-password"])
async def test_the_routing_store_refuses_an_external_reference_in_both(reference: str) -> None:
    routing = _stores()[1]
    with pytest.raises(ConfigurationError) as checked:
        await routing.check_put(TENANT, reference, "pw")
    with pytest.raises(ConfigurationError) as written:
        await routing.put(TENANT, reference, "pw")
    assert type(checked.value) is type(written.value)


async def test_an_accepted_check_stores_nothing() -> None:
    for store in _stores():
        await store.check_put(TENANT, REFERENCE, "x" * MAX_SECRET_BYTES)
        with pytest.raises(ProviderError):
            await store.resolve(TENANT, REFERENCE)
        await store.put(TENANT, REFERENCE, "pw")
        assert await store.resolve(TENANT, REFERENCE) == "pw"
