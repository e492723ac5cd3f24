"""The suite-wide leak scan (``tests/_leak_scan.py``) fails a session whose ESRA output leaks.

Most tests run a tiny inner suite in a subprocess, with the plugin loaded the way the real
suite loads it and a retriever that returns a prepared response — so what is proved is the
plugin's wiring (wrapping, attribution, report, exit status, restoring), on top of the
scanner's own tests in ``tests/core/test_leaks.py``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from esra.core._audit.record import AuditRecord
from esra.core._pipeline.scope import resolve_scope
from esra.core.codes import AuditEvent
from esra.core.testing import FakeClock
from esra.core.testing._invocations import audited
from tests import _leak_scan
from tests.core.factories import make_context, make_snapshot, make_source

ROOT = Path(__file__).resolve().parents[1]

INNER_CONFIG = """
[pytest]
addopts = --strict-markers
filterwarnings = error
asyncio_default_fixture_loop_scope = function
"""

# A retriever whose pipeline is replaced by a prepared answer; ``retrieve`` itself (which the
# plugin wraps) still runs, so its classification of errors applies as in production.
INNER_PRELUDE = """
import asyncio

from esra.core._audit.record import AuditRecord
from esra.core.codes import AuditEvent, WarningCode
from esra.core._context import CallerIdentity, InvocationContext
from esra.core.exceptions import EsraError, NoSourcesAvailableError
from esra.core._fetch.tokens import Keyring
from esra.core._response import ResponseStatus, ResponseWarning, ResultItem, RetrievalResponse
from esra.core._retriever import Retriever
from esra.core.testing import (
    FakeClock,
    FakeLanguageModel,
    InMemoryAuditSink,
    InMemoryConfigRepository,
    InMemorySecretStore,
)

CTX = InvocationContext(
    tenant_id="t", client_app_id="app", caller=CallerIdentity("u"),
    exposure_slug="hr", correlation_id="c-1",
)


class PreparedRetriever(Retriever):
    def __init__(self, warning="", audit_dimension="", error=None, fragment=""):
        self.sink = InMemoryAuditSink()
        super().__init__(
            config=InMemoryConfigRepository(), providers={}, model=FakeLanguageModel(),
            audit=self.sink,
        )
        self.warning, self.audit_dimension, self.error = warning, audit_dimension, error
        self.fragment = fragment

    async def _retrieve(self, ctx, request, filters=()):
        if self.audit_dimension:
            record = AuditRecord.of(
                ctx, FakeClock(), AuditEvent.RETRIEVE, dimensions={"x": self.audit_dimension}
            )
            await self.sink.record(record)
        if self.error is not None:
            raise self.error
        warnings = (ResponseWarning(WarningCode.ESRA_SOURCE_FAILED, self.warning),)
        return RetrievalResponse(
            status=ResponseStatus.DEGRADED if self.warning else ResponseStatus.COMPLETE,
            results=(ResultItem("r_1", "HR", "Leave", self.fragment, 1.0),)
            if self.fragment else (),
            warnings=warnings if self.warning else (),
            correlation_id=ctx.correlation_id,
        )


def ask(retriever):
    return asyncio.run(retriever.retrieve(CTX, "leave policy"))
"""

RESTORE_CHECK = """
from esra.core._audit.record import AuditRecord
from esra.core._retriever import Retriever


def pytest_unconfigure(config):
    wrapped = [
        f for f in (Retriever.__dict__["retrieve"], AuditRecord.__dict__["__init__"])
        if hasattr(f, "__wrapped__")
    ]
    print(f"wrappers left after the session: {len(wrapped)}")
"""


@pytest.fixture
def inner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """An inner project that loads the leak scan plugin and can import ``tests``."""
    pytester.makeini(INNER_CONFIG)
    pytester.makeconftest(RESTORE_CHECK)
    pytester.makepyfile(prepared=INNER_PRELUDE)
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    monkeypatch.setenv("PYTHONPATH", path)
    return pytester


def _run(inner: pytest.Pytester) -> pytest.RunResult:
    return inner.runpytest_subprocess("-p", "tests._leak_scan", "-p", "no:cacheprovider")


def test_sql_in_a_warning_fails_the_session_with_a_report(inner: pytest.Pytester) -> None:
    """The inner test passes, yet the session fails and names the test, the rule and the text."""
    inner.makepyfile(
        test_inner="""
        from prepared import PreparedRetriever, ask

        def test_clean():
            assert ask(PreparedRetriever()).warnings == ()

        def test_leaky():
            ask(PreparedRetriever(warning="Source 'HR' failed: SELECT * FROM hr.salaries"))
        """
    )
    result = _run(inner)
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*leak scan: ESRA output leaked*",
            "test_inner.py::test_leaky [[]response[]] response.warnings[[]0[]].message:"
            " sql.select_from (sql): *SELECT * FROM*",
            "leak scan: 2 responses, *0 audit records, 0 errors scanned, * leaks",
        ]
    )
    assert "test_inner.py::test_clean [" not in result.stdout.str()
    result.stdout.fnmatch_lines(["wrappers left after the session: 0"])


def test_audit_records_and_errors_are_scanned_too(inner: pytest.Pytester) -> None:
    """A DSN in an audit dimension and driver text in a raised error are both reported."""
    inner.makepyfile(
        test_inner="""
        import pytest
        from prepared import EsraError, NoSourcesAvailableError, PreparedRetriever, ask

        def test_audit():
            ask(PreparedRetriever(audit_dimension="postgresql://u:p@db.internal/hr"))

        def test_error():
            error = NoSourcesAvailableError('relation "hr_salaries" does not exist')
            with pytest.raises(EsraError):
                ask(PreparedRetriever(error=error))

        def test_unclassified():
            with pytest.raises(EsraError):
                ask(PreparedRetriever(error=KeyError("hr_salaries")))
        """
    )
    result = _run(inner)
    result.assert_outcomes(passed=3)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    assert re.search(
        r"test_inner.py::test_audit \[audit\] audit.dimensions\['x'\]: connection", out
    )
    assert "p@db.internal" not in out  # the report redacts the password
    assert re.search(r"test_inner.py::test_error \[error\] error.message: provider\.", out)
    # Retriever.retrieve turns the KeyError into a bare ESRA_INTERNAL, and records that end
    # without the detail (the second audit record): nothing to report.
    assert "test_unclassified" not in out
    assert re.search(r"leak scan: 1 responses, .*2 audit records, 2 errors scanned, \d+ leaks", out)


def test_a_clean_session_passes_and_prints_the_summary(inner: pytest.Pytester) -> None:
    """Without leaks the exit status is untouched and the summary says 0 leaks."""
    inner.makepyfile(
        test_inner="""
        from prepared import PreparedRetriever, ask

        def test_degraded():
            ask(PreparedRetriever(warning="Source 'HR' failed: TIMEOUT."))
        """
    )
    result = _run(inner)
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["leak scan: 1 responses, *0 errors scanned, 0 leaks"])
    result.stdout.no_fnmatch_line("*ESRA output leaked*")


async def test_only_records_esra_builds_are_captured() -> None:
    """A record built by test code is a sample or an expectation; one built by ESRA is output.

    Runs in this very session: the hostile record built here is not captured (so the
    suite-wide scan will not fail on it), the one scope resolution builds is.
    """
    collector = _leak_scan._collector()
    if collector is None:
        pytest.skip("the leak scan plugin is not active in this session")
    before = len(collector.captures)
    AuditRecord.of(make_context(), FakeClock(), AuditEvent.RETRIEVE, reason="SELECT * FROM x")
    assert len(collector.captures) == before
    async with audited(make_context()) as invocation:
        await resolve_scope(invocation, make_snapshot([make_source("s-1")]), health={})
    assert [c.kind for c in collector.captures[before:]] == ["audit"]
    assert collector.captures[-1].nodeid.endswith("test_only_records_esra_builds_are_captured")


def test_secrets_seen_anywhere_in_the_session_are_looked_for_in_content(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A secret-store value, key material and the test DSN's host are leaks even in data."""
    monkeypatch.setenv("ESRA_TEST_POSTGRES_DSN", "postgresql://esra@db-qz1.internal:5432/x")
    inner.makepyfile(
        test_inner="""
        from prepared import InMemorySecretStore, Keyring, PreparedRetriever, ask

        def test_store():
            InMemorySecretStore({("t", "pw"): "pw-qz2-secret"})
            ask(PreparedRetriever(fragment="the password is pw-qz2-secret"))

        def test_key():
            key = Keyring.new_key()
            Keyring({"k1": key}, current="k1")
            ask(PreparedRetriever(fragment=f"key {key.hex()}"))

        def test_dsn():
            ask(PreparedRetriever(fragment="reach us at db-qz1.internal:5432"))
        """
    )
    result = _run(inner)
    result.assert_outcomes(passed=3)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    for test in ("test_store", "test_key", "test_dsn"):
        assert re.search(
            rf"test_inner.py::{test} \[response\] response.results\[0\].fragment: "
            r"credential.known_secret",
            out,
        ), test
    assert "pw-qz2-secret" not in out
    assert "db-qz1.internal:5432" not in out
