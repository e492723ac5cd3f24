"""Health is probed only for sources in the caller's scope, so a failing probe names no other.

Regression for the retriever probing every source the exposure's capability binds before
scope resolution: a source excluded for the caller by its source policy, its lifecycle, the
exposure's subset or the caller's runtime authorization — or a caller the tool's access
policy refuses outright — still had its health checked on the caller's behalf, and a failing
check logged the source's id.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from esra.core._audit.record import AuditRecord
from esra.core._retriever import Retriever
from esra.core.config import LifecycleState, SourceHealth, SourcePolicy
from esra.core.exceptions import ExposureNotFoundError
from esra.core.testing import (
    FakeClock,
    FakeLanguageModel,
    InMemoryAuditSink,
    InMemoryConfigRepository,
    InMemorySearchProvider,
)
from tests.core.factories import (
    make_capability,
    make_context,
    make_exposure,
    make_snapshot,
    make_source,
)

HIDDEN = "s-hidden"
HIDDEN_NAME = "Source s-hidden"
ROWS = {
    f"m-{s}": [{"col_id": 1, "col_title": "Leave policy", "col_body": "annual leave rules"}]
    for s in ("s-1", HIDDEN)
}


class FailingHealthProvider(InMemorySearchProvider):
    """A provider whose health check raises, quoting its own source id as a driver might."""

    def __init__(self, source_id: str) -> None:
        super().__init__(ROWS)
        self._source_id = source_id
        self.health_calls = 0

    async def health(self) -> SourceHealth:
        self.health_calls += 1
        msg = f"could not connect to the database of {self._source_id}"
        raise ConnectionError(msg)


def _exclusions() -> dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, Any]]]:
    """Per level: (hidden source changes, exposure changes, context changes)."""
    return {
        "source_policy_client_app": (
            {"policy": SourcePolicy(allowed_client_apps=frozenset({"other-app"}))},
            {},
            {},
        ),
        "lifecycle_draft": ({"lifecycle": LifecycleState.DRAFT}, {}, {}),
        "lifecycle_retired": ({"lifecycle": LifecycleState.RETIRED}, {}, {}),
        "exposure_subset": ({}, {"source_subset": frozenset({"s-1"})}, {}),
        "runtime_authorization": ({}, {}, {"authorized_source_ids": ["s-1"]}),
    }


def _retriever(
    *, hidden: dict[str, Any] | None = None, exposure: dict[str, Any] | None = None
) -> tuple[Retriever, InMemoryAuditSink, FailingHealthProvider]:
    snapshot = make_snapshot(
        [make_source("s-1"), make_source(HIDDEN, **(hidden or {}))],
        capability=make_capability(["s-1", HIDDEN]),
        exposure=make_exposure(**(exposure or {})),
    )
    failing = FailingHealthProvider(HIDDEN)
    audit = InMemoryAuditSink()
    retriever = Retriever(
        config=InMemoryConfigRepository([snapshot]),
        providers={"s-1": InMemorySearchProvider(ROWS), HIDDEN: failing},
        model=FakeLanguageModel(),
        audit=audit,
        clock=FakeClock(),
    )
    return retriever, audit, failing


def _logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Every captured record as a handler would write it: message, arguments and traceback."""
    formatter = logging.Formatter("%(name)s %(message)s")
    return [formatter.format(record) for record in caplog.records]


def _assert_never_named(lines: list[str], records: list[AuditRecord]) -> None:
    for text in (HIDDEN, HIDDEN_NAME):
        assert not [line for line in lines if text in line]
        assert not [r for r in records if text in repr(r.dimensions)]


@pytest.mark.parametrize("level", list(_exclusions()))
async def test_a_failing_source_outside_the_callers_scope_is_never_probed_nor_logged(
    level: str, caplog: pytest.LogCaptureFixture
) -> None:
    hidden, exposure, ctx = _exclusions()[level]
    retriever, audit, failing = _retriever(hidden=hidden, exposure=exposure)
    caplog.set_level(logging.DEBUG)

    response = await retriever.retrieve(make_context(**ctx), "annual leave")

    assert {r.source for r in response.results} == {"Source s-1"}
    assert failing.health_calls == 0
    _assert_never_named(_logged(caplog), audit.records)


async def test_a_caller_the_access_policy_refuses_causes_no_probe_at_all(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The tool does not exist for this caller: nothing about its sources may happen."""
    retriever, audit, failing = _retriever()
    caplog.set_level(logging.DEBUG)

    with pytest.raises(ExposureNotFoundError):
        await retriever.retrieve(make_context(client_app_id="another-app"), "annual leave")

    assert failing.health_calls == 0
    _assert_never_named(_logged(caplog), audit.records)


async def test_a_failing_source_in_the_callers_scope_is_probed_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The control: the same failure of a source the caller may use is logged, so the
    assertions above could fail."""
    retriever, _, failing = _retriever()
    caplog.set_level(logging.DEBUG)

    response = await retriever.retrieve(make_context(), "annual leave")

    assert {r.source for r in response.results} == {"Source s-1"}
    assert failing.health_calls == 1
    assert [line for line in _logged(caplog) if HIDDEN in line]
