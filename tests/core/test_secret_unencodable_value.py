"""A secret value the store cannot encode is refused without describing the value.

A JSON body may carry lone surrogates (``"\\ud800"``), which no UTF-8 text can hold. The
encrypted store refuses such a value, and its refusal becomes the API's error message and
the audit record's reason. Python's own encoding error names the offending character and its
position in the value: neither may reach a message or an audit record, which describe a
secret's write, never its content.
"""

from __future__ import annotations

import pytest

from esra.core.admin import (
    Administrator,
    ConnectionSecretService,
    Grant,
    InMemoryWorkspaceStore,
    Role,
)
from esra.core.codes import AuditEvent, ErrorCode
from esra.core.exceptions import ConfigurationError
from esra.core.secrets import (
    DENY_ALL,
    EncryptedSecretStore,
    KeyEncryptionKeys,
    ReferenceSecretResolver,
    RoutingSecretStore,
)
from esra.core.testing import FakeClock, InMemoryAuditSink, InMemorySecretTable
from tests.core.factories import TENANT

pytestmark = pytest.mark.asyncio

SECURITY = Administrator.of("security", Grant(Role.SECURITY_MANAGE, TENANT))
VALUE = "hunter2-and-then-\ud800-more"


def _says_nothing_of_the_value(text: str) -> None:
    assert "\ud800" not in text
    assert "position" not in text
    assert str(VALUE.index("\ud800")) not in text


async def test_the_stores_refusal_does_not_describe_the_value() -> None:
    store = EncryptedSecretStore(InMemorySecretTable(), KeyEncryptionKeys.generate("k1"))
    for write in (store.check_put, store.put):
        with pytest.raises(ConfigurationError) as refused:
            await write(TENANT, "sales-db", VALUE)
        _says_nothing_of_the_value(str(refused.value))
        assert refused.value.__cause__ is None
        assert refused.value.__context__ is None or refused.value.__suppress_context__


async def test_the_audited_reason_does_not_describe_the_value() -> None:
    stored = EncryptedSecretStore(InMemorySecretTable(), KeyEncryptionKeys.generate("k1"))
    vault = RoutingSecretStore(
        stored=stored, external=ReferenceSecretResolver({}, default=DENY_ALL)
    )
    audit = InMemoryAuditSink()
    service = ConnectionSecretService(
        InMemoryWorkspaceStore(), vault, audit=audit, clock=FakeClock()
    )
    with pytest.raises(ConfigurationError) as refused:
        await service.put_secret(SECURITY, TENANT, "sales-db", VALUE)
    assert refused.value.code is ErrorCode.ESRA_CONFIGURATION_INVALID
    (record,) = audit.records
    assert (record.event, record.outcome) == (AuditEvent.ADMIN_SECRET_WRITE, "rejected")
    _says_nothing_of_the_value(record.reason or "")
