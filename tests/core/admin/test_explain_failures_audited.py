"""An explain the pipeline refuses or fails is still audited as ``esra.explain``.

The operator's explain was recorded only when it succeeded (``ok``) or was denied: one whose
pipeline raised — an exposure it does not serve, an invalid question, a source's driver
failing — left no ``esra.explain`` record of who explained what. Spec 003 audits every
administrative action, refused and failed ones included, with a classified reason.
"""

from __future__ import annotations

from typing import Any

import pytest

from esra.core._admin.explaining import ExplainRequest, ExplainService
from esra.core._context import CallerIdentity
from esra.core.admin import Administrator, Grant, Role
from esra.core.codes import AuditEvent
from esra.core.exceptions import ExposureNotFoundError
from esra.core.testing import FakeClock, InMemoryAuditSink
from tests.core.factories import SLUG, TENANT

pytestmark = pytest.mark.asyncio

DRIVER_TEXT = "connection to db-3.internal refused for user esra"


class RaisingRetriever:
    def __init__(self, error: Exception) -> None:
        self.error = error

    async def explain(self, *_args: Any, **_kwargs: Any) -> Any:
        raise self.error


def _service(error: Exception) -> tuple[ExplainService, InMemoryAuditSink]:
    audit = InMemoryAuditSink()
    retrievers: Any = {TENANT: RaisingRetriever(error)}
    return ExplainService(retrievers, audit=audit, clock=FakeClock()), audit


def _request() -> ExplainRequest:
    caller = CallerIdentity(subject="alice", claims={})
    return ExplainRequest(exposure=SLUG, request="why?", caller=caller, client_app_id="app-1")


OPERATOR = Administrator.of("ops", Grant(Role.ESRA_EXPOSURE_MANAGE, TENANT))


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (ExposureNotFoundError(), "ESRA_EXPOSURE_NOT_FOUND"),
        (RuntimeError(DRIVER_TEXT), "unexpected_error"),
    ],
)
async def test_an_explain_the_pipeline_refuses_is_audited(error: Exception, reason: str) -> None:
    service, audit = _service(error)

    with pytest.raises(type(error)):
        await service.explain(OPERATOR, TENANT, _request())

    (record,) = [r for r in audit.records if r.event is AuditEvent.EXPLAIN]
    assert record.outcome == "failed"
    assert record.reason == reason
    assert record.dimensions["subject"] == "ops"
    assert DRIVER_TEXT not in repr(record)
