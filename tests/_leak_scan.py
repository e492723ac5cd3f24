"""Suite-wide leak scan: everything the suite makes ESRA return or audit is checked at the end.

Registered from ``tests/conftest.py``. For the whole session it wraps, and afterwards
restores:

- ``Retriever.retrieve`` — every ``RetrievalResponse`` it returns and every exception it
  raises (which must be an ``EsraError`` with a classified code and a clean message);
- the ``fetch`` coroutine of each class in ``esra.core._fetch.service``, when that module
  exists — every fetched document and every exception;
- ``AuditRecord.__init__`` — every record ESRA code creates, whichever sink it goes to. Records
  a test builds itself (an expected value, a hostile sample) are not ESRA output and are
  skipped: the first frame outside ``esra.core._audit.record`` and attrs decides, by its file;
- where secrets enter the suite — ``InMemorySecretStore``, ``InMemorySecretVault.put``,
  ``Keyring`` key material and the ``ESRA_TEST_*_DSN`` variables — so their exact values can
  be looked for everywhere, content included.

Each capture remembers the test (node id and phase) that produced it and, when the component
reads a ``StaticConfigRepository``, the invocation's :class:`LeakKnowledge` (physical names,
unauthorized sources, returnable fields). Audit records created during an invocation inherit
its knowledge. At session end everything is scanned with ``esra.core.testing.leaks.scan`` —
its docstring says which parts count as ESRA-composed text and which as returned data — and
any leak fails the session with a report. A summary line is printed either way.

Under pytest-xdist each worker scans its own captures and hands its findings to the
controller, which reports them; without xdist none of that code runs.
"""

from __future__ import annotations

import contextvars
import functools
import importlib
import inspect
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

import attrs
import pytest

from esra.core._audit.record import AuditRecord
from esra.core._context import InvocationContext
from esra.core._retriever import Retriever
from esra.core._static_config import StaticConfigRepository
from esra.core.testing.leaks import Leak, LeakKnowledge, scan

__all__ = ["Collector", "Finding"]

FETCH_SERVICE = "esra.core._fetch.service"
MAX_REPORTED = 60


def _spellings(path: str) -> set[str]:
    # Frames name a file by the path it was imported under; a symlinked checkout has two.
    return {path, str(Path(path).resolve())}


_TESTS_DIRS = tuple(d + os.sep for d in _spellings(str(Path(__file__).parent)))
_THIS_FILES = frozenset(_spellings(__file__))
_AUDIT_FILES = frozenset(_spellings(inspect.getfile(AuditRecord)))
# attrs builds instances from ``attr`` (evolve, converters) as well as ``attrs``; cattrs when
# structuring. Frames there are neither ESRA nor a test.
_LIBRARY_DIRS = tuple(
    d + os.sep
    for name in ("attr", "attrs", "cattrs")
    for d in _spellings(str(Path(inspect.getfile(importlib.import_module(name))).parent))
)
_WORKER_KEY = "esra_leak_scan"


@attrs.frozen
class Finding:
    """One leak, and the test and kind of capture it came from."""

    nodeid: str
    kind: str
    leak: Leak

    def line(self) -> str:
        return f"{self.nodeid} [{self.kind}] {self.leak}"


@attrs.frozen
class _Capture:
    kind: str
    nodeid: str
    value: object
    knowledge: LeakKnowledge | None


@attrs.define
class Collector:
    """What one session captured, and where the suite currently is."""

    nodeid: str = "(collection)"
    captures: list[_Capture] = attrs.Factory(list)
    secrets: set[str | bytes] = attrs.Factory(set)
    notes: list[str] = attrs.Factory(list)

    def capture(self, kind: str, value: object, knowledge: LeakKnowledge | None) -> None:
        self.captures.append(_Capture(kind, self.nodeid, value, knowledge))

    def counts(self) -> Counter[str]:
        return Counter(c.kind for c in self.captures)

    def scan(self) -> list[Finding]:
        """Scan every capture, each with its invocation's knowledge plus every secret seen."""
        findings: list[Finding] = []
        plain = LeakKnowledge().with_secrets(self.secrets)
        merged: dict[int, LeakKnowledge] = {}
        for capture in self.captures:
            knowledge = plain
            if capture.knowledge is not None:
                key = id(capture.knowledge)
                if key not in merged:
                    merged[key] = attrs.evolve(
                        capture.knowledge, secrets=capture.knowledge.secrets | plain.secrets
                    )
                knowledge = merged[key]
            for leak in scan(capture.value, knowledge=knowledge, path=capture.kind):
                findings.append(Finding(capture.nodeid, capture.kind, leak))
        return findings


# One collector per running session; a session started inside another (pytester in-process)
# captures into its own and leaves the outer one untouched.
_STACK: list[Collector] = []
_KNOWLEDGE: contextvars.ContextVar[LeakKnowledge | None] = contextvars.ContextVar(
    "esra_leak_knowledge", default=None
)
_RESTORE: list[Callable[[], None]] = []
# The classes of the fetch service whose ``fetch`` is wrapped (none while it does not exist).
_FETCH_CLASSES: list[str] = []


def _collector() -> Collector | None:
    return _STACK[-1] if _STACK else None


def _replace(owner: type, name: str, make: Callable[[Any], Any]) -> None:
    original = owner.__dict__[name]
    setattr(owner, name, make(original))
    _RESTORE.append(lambda: setattr(owner, name, original))


def _made_by_tests() -> bool:
    """Whether the record being built comes from test code rather than from ESRA."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not (
            filename.startswith("<")
            or filename in _AUDIT_FILES
            or filename.startswith(_LIBRARY_DIRS)
        ):
            return filename.startswith(_TESTS_DIRS) and filename not in _THIS_FILES
        frame = frame.f_back
    return False


def _static_repository(component: object) -> StaticConfigRepository | None:
    state = getattr(component, "__dict__", {})
    for value in state.values():
        if (
            isinstance(value, StaticConfigRepository)
            and type(value).snapshot is StaticConfigRepository.snapshot
        ):
            return value
    return None


async def _knowledge(component: object, args: tuple[Any, ...]) -> LeakKnowledge | None:
    """The invocation's knowledge, when its context and configuration can be read safely."""
    ctx = next((a for a in args if isinstance(a, InvocationContext)), None)
    repository = _static_repository(component)
    if ctx is None or repository is None:
        return None
    try:
        snapshot = await repository.snapshot(ctx.tenant_id)
        return LeakKnowledge.from_snapshot(snapshot, ctx) if snapshot is not None else None
    except Exception:  # the scan must never change what a test sees
        return None


def _capturing(kind: str) -> Callable[[Any], Any]:
    def make(original: Any) -> Any:
        @functools.wraps(original)
        async def wrapper(self: object, *args: Any, **kwargs: Any) -> Any:
            collector = _collector()
            if collector is None:
                return await original(self, *args, **kwargs)
            knowledge = await _knowledge(self, (*args, *kwargs.values()))
            token = _KNOWLEDGE.set(knowledge)
            try:
                result = await original(self, *args, **kwargs)
            except Exception as exc:
                collector.capture("error", exc, knowledge)
                raise
            finally:
                _KNOWLEDGE.reset(token)
            collector.capture(kind, result, knowledge)
            return result

        return wrapper

    return make


def _recording_audit(original: Any) -> Any:
    @functools.wraps(original)
    def init(self: AuditRecord, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        collector = _collector()
        if collector is not None and not _made_by_tests():
            collector.capture("audit", self, _KNOWLEDGE.get())

    return init


def _secret(value: object) -> None:
    collector = _collector()
    if collector is not None and isinstance(value, str | bytes | bytearray):
        collector.secrets.add(value if isinstance(value, str) else bytes(value))


def _recording_secret_store(original: Any) -> Any:
    @functools.wraps(original)
    def init(self: object, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        secrets = args[0] if args else kwargs.get("secrets")
        if isinstance(secrets, Mapping):
            for value in secrets.values():
                _secret(value)

    return init


def _recording_vault_put(original: Any) -> Any:
    @functools.wraps(original)
    async def put(self: object, *args: Any, **kwargs: Any) -> None:
        _secret(args[2] if len(args) > 2 else kwargs.get("value"))
        await original(self, *args, **kwargs)

    return put


def _recording_keyring(original: Any) -> Any:
    @functools.wraps(original)
    def init(self: object, keys: Any, *args: Any, **kwargs: Any) -> None:
        if isinstance(keys, Mapping):
            for key in keys.values():
                _secret(key)
        original(self, keys, *args, **kwargs)

    return init


def _recording_new_key(original: Any) -> Any:
    function = original.__func__

    @functools.wraps(function)
    def new_key() -> bytes:
        key: bytes = function()
        _secret(key)
        return key

    return staticmethod(new_key)


def _recording_rotated(original: Any) -> Any:
    @functools.wraps(original)
    def rotated(self: object, *args: Any, **kwargs: Any) -> Any:
        _secret(args[1] if len(args) > 1 else kwargs.get("key"))
        return original(self, *args, **kwargs)

    return rotated


def _fetch_service(collector: Collector) -> ModuleType | None:
    try:
        return importlib.import_module(FETCH_SERVICE)
    except ModuleNotFoundError as exc:
        if exc.name != FETCH_SERVICE:
            collector.notes.append(f"{FETCH_SERVICE} did not import: {exc.name} is missing")
    except Exception as exc:
        collector.notes.append(f"{FETCH_SERVICE} did not import ({type(exc).__name__})")
    return None


# Where secret values enter the suite. Each is optional: a class moved or renamed elsewhere
# costs its wrapper (and a note in the summary), never the test run.
_SECRET_ENTRIES: tuple[tuple[str, str, str, Callable[[Any], Any]], ...] = (
    ("esra.core.testing._fakes", "InMemorySecretStore", "__init__", _recording_secret_store),
    ("esra.core._admin.secrets", "InMemorySecretVault", "put", _recording_vault_put),
    ("esra.core._fetch.tokens", "Keyring", "__init__", _recording_keyring),
    ("esra.core._fetch.tokens", "Keyring", "new_key", _recording_new_key),
    ("esra.core._fetch.tokens", "Keyring", "rotated", _recording_rotated),
)


def _install(collector: Collector) -> None:
    _replace(Retriever, "retrieve", _capturing("response"))
    _replace(AuditRecord, "__init__", _recording_audit)
    for module_name, class_name, name, make in _SECRET_ENTRIES:
        try:
            owner = getattr(importlib.import_module(module_name), class_name)
        except (ImportError, AttributeError):
            owner = None
        if not isinstance(owner, type) or name not in vars(owner):
            collector.notes.append(f"{module_name}.{class_name}.{name} not found: not watched")
            continue
        _replace(owner, name, make)
    module = _fetch_service(collector)
    if module is None:
        return
    for owner in list(vars(module).values()):
        if not isinstance(owner, type) or owner.__module__ != module.__name__:
            continue
        if inspect.iscoroutinefunction(vars(owner).get("fetch")):
            _replace(owner, "fetch", _capturing("fetch"))
            _FETCH_CLASSES.append(owner.__qualname__)


def _uninstall() -> None:
    while _RESTORE:
        _RESTORE.pop()()
    _FETCH_CLASSES.clear()


def _phase(item: pytest.Item, phase: str) -> None:
    collector = _collector()
    if collector is not None:
        collector.nodeid = item.nodeid if phase == "call" else f"{item.nodeid} ({phase})"


@attrs.define
class _SessionState:
    collector: Collector
    fetch_wrapped: bool = False
    findings: list[Finding] = attrs.Factory(list)
    worker_findings: list[str] = attrs.Factory(list)
    worker_counts: Counter[str] = attrs.Factory(Counter)
    summary: str = ""
    reported: bool = False


_STATE = pytest.StashKey[_SessionState]()


def pytest_sessionstart(session: pytest.Session) -> None:
    collector = Collector()
    for name, value in os.environ.items():
        if name.startswith("ESRA_TEST_") and name.endswith("_DSN"):
            collector.secrets.add(value)
    if not _STACK:
        _install(collector)
    _STACK.append(collector)
    session.config.stash[_STATE] = _SessionState(collector, fetch_wrapped=bool(_FETCH_CLASSES))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _phase(item, "setup")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    _phase(item, "call")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    _phase(item, "teardown")


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """xdist controller: collect a finished worker's findings and counts."""
    state = node.config.stash.get(_STATE, None)
    output = getattr(node, "workeroutput", {}).get(_WORKER_KEY)
    if state is None or output is None:
        return
    state.worker_findings.extend(output["findings"])
    state.worker_counts.update(output["counts"])


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    state = session.config.stash.get(_STATE, None)
    if state is None:
        return
    if _STACK and _STACK[-1] is state.collector:
        _STACK.pop()
        if not _STACK:
            _uninstall()
    try:
        state.findings = state.collector.scan()
    except Exception as exc:  # a scanner bug must fail the session, not pass it silently
        state.worker_findings.append(f"(session) the leak scan itself failed: {exc!r}")
    counts = state.collector.counts() + state.worker_counts
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput[_WORKER_KEY] = {
            "findings": [f.line() for f in state.findings],
            "counts": dict(counts),
        }
    leaks = len(_grouped(state)) if state.findings or state.worker_findings else 0
    fetched = f"{counts['fetch']} fetch results, " if state.fetch_wrapped else ""
    state.summary = (
        f"leak scan: {counts['response']} responses, {fetched}{counts['audit']} audit records, "
        f"{counts['error']} errors scanned, {leaks} leaks"
    )
    if leaks and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _grouped(state: _SessionState) -> Counter[str]:
    """Identical findings (the same leak in one test's every invocation) are reported once."""
    return Counter([*(f.line() for f in state.findings), *state.worker_findings])


def _report_lines(state: _SessionState) -> Iterator[str]:
    grouped = _grouped(state)
    for line, times in list(grouped.items())[:MAX_REPORTED]:
        yield line if times == 1 else f"{line}  (x{times})"
    if len(grouped) > MAX_REPORTED:
        yield f"... and {len(grouped) - MAX_REPORTED} more"


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is None or not state.summary or hasattr(config, "workerinput"):
        return
    state.reported = True
    if state.findings or state.worker_findings:
        terminalreporter.write_sep("=", "leak scan: ESRA output leaked", red=True, bold=True)
        for line in _report_lines(state):
            terminalreporter.write_line(line)
    for note in state.collector.notes:
        terminalreporter.write_line(f"leak scan note: {note}")
    terminalreporter.write_line(state.summary, red=bool(state.findings or state.worker_findings))


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is None:
        return
    if _STACK and state.collector in _STACK:
        # The session never finished normally (an internal error): do not leave wrappers.
        _STACK.remove(state.collector)
        if not _STACK:
            _uninstall()
    if state.summary and not state.reported and not hasattr(config, "workerinput"):
        for line in (*_report_lines(state), state.summary):
            print(line, file=sys.stderr)
