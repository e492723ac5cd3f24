"""An owner's sandbox servers: one per request served at once, up to ``max_servers``.

With one server per owner, every request waited for the one before it: a hostile package
held every other upload of the process — every tenant's — for up to its wall limit (60 s).
With several, one tenant's packages sent together still held them all; a holder is now lent
all servers but one.
The first request here is held deterministically: its server's answer is read only once
the test lets it through.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from typing import IO

import pytest

from esra.core._docstore._text_pdf import text_pdf
from esra.core._docstore.formats import DocumentFormat
from esra.core._docstore.sandbox import ExtractionSandbox, SandboxLimits

PDF = text_pdf(["held"])
# A bound for a thread that should finish: reached only when the code under test is wrong.
_DEADLOCK_S = 60.0


class _HeldAnswer:
    """A server's output whose first answer waits for ``release``."""

    def __init__(self, stream: IO[bytes], release: threading.Event) -> None:
        self._stream, self._release, self.held = stream, release, threading.Event()

    def readline(self) -> bytes:
        self.held.set()
        self._release.wait()
        return self._stream.readline()

    def close(self) -> None:
        self._stream.close()


class _CountingSandbox(ExtractionSandbox):
    """Counts the servers it starts; the first one's first answer is held until released."""

    def __init__(self, max_servers: int) -> None:
        super().__init__(max_servers)
        self.started: list[int] = []
        self.release = threading.Event()
        self.first: _HeldAnswer | None = None
        self.first_started = threading.Event()

    def _start(self) -> subprocess.Popen[bytes] | None:
        server = super()._start()
        assert server is not None
        assert server.stdout is not None
        if not self.started:
            self.first = _HeldAnswer(server.stdout, self.release)
            server.stdout = self.first  # type: ignore[assignment]
            self.first_started.set()
        self.started.append(server.pid)
        return server


def _extract(sandbox: ExtractionSandbox, holder: str | None = None) -> dict[str, object]:
    return sandbox.extract(PDF, SandboxLimits(), reader=DocumentFormat.PDF, holder=holder)


def _in_thread(
    sandbox: ExtractionSandbox, holder: str | None = None
) -> tuple[threading.Thread, list[dict[str, object]]]:
    answers: list[dict[str, object]] = []
    thread = threading.Thread(target=lambda: answers.append(_extract(sandbox, holder)))
    thread.start()
    return thread, answers


def _held(sandbox: _CountingSandbox) -> None:
    """Return once the first request is being held, its server busy."""
    assert sandbox.first_started.wait(_DEADLOCK_S)
    assert sandbox.first is not None
    assert sandbox.first.held.wait(_DEADLOCK_S)


def test_a_held_request_leaves_the_next_one_a_server_of_its_own() -> None:
    with _CountingSandbox(max_servers=2) as sandbox:
        held, held_answer = _in_thread(sandbox)
        _held(sandbox)
        # Served while the first is still held (with one server it waited for it, for ever).
        assert _extract(sandbox)["pages"] == ["held"]
        assert held.is_alive()
        sandbox.release.set()
        held.join(_DEADLOCK_S)
        assert held_answer[0]["pages"] == ["held"]
        assert len(sandbox.started) == 2


def test_past_max_servers_a_request_waits_for_a_server_to_come_free() -> None:
    with _CountingSandbox(max_servers=1) as sandbox:
        held, _ = _in_thread(sandbox)
        _held(sandbox)
        waiting, waiting_answer = _in_thread(sandbox)
        sandbox.release.set()
        held.join(_DEADLOCK_S)
        waiting.join(_DEADLOCK_S)
        assert waiting_answer[0]["pages"] == ["held"]
        assert len(sandbox.started) == 1  # the freed server served the waiting request


def test_requests_one_after_another_reuse_one_server() -> None:
    with _CountingSandbox(max_servers=4) as sandbox:
        sandbox.release.set()
        for _ in range(3):
            assert _extract(sandbox)["pages"] == ["held"]
        assert len(sandbox.started) == 1


def test_a_server_lent_when_the_sandbox_closes_is_stopped_when_given_back() -> None:
    sandbox = _CountingSandbox(max_servers=2)
    held, _ = _in_thread(sandbox)
    _held(sandbox)
    sandbox.close()
    sandbox.release.set()
    held.join(_DEADLOCK_S)
    assert sandbox.server_pid is None
    (pid,) = sandbox.started
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # stopped and reaped


def test_max_servers_is_at_least_one() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        ExtractionSandbox(max_servers=0)


def test_a_server_that_dies_mid_request_fails_that_request_only() -> None:
    """Its document is refused, the dead server is reaped, never lent again, and the next
    request gets a new one."""
    with _CountingSandbox(max_servers=2) as sandbox:
        held, held_answer = _in_thread(sandbox)
        _held(sandbox)
        (dead,) = sandbox.started
        os.kill(dead, signal.SIGKILL)
        sandbox.release.set()
        held.join(_DEADLOCK_S)
        assert held_answer == [{"refusal": "MALFORMED_DOCUMENT", "detail": "sandbox server died"}]
        with pytest.raises(ProcessLookupError):
            os.kill(dead, 0)  # reaped
        assert _extract(sandbox)["pages"] == ["held"]
        assert len(sandbox.started) == 2


class _CapWatchingSandbox(_CountingSandbox):
    """Tells when a request waits because its holder holds all a holder may."""

    def __init__(self, max_servers: int) -> None:
        super().__init__(max_servers)
        self.capped = threading.Event()

    def _at_cap(self, holder: str | None) -> bool:
        capped = super()._at_cap(holder)
        if capped:
            self.capped.set()
        return capped


def test_one_holder_is_never_lent_every_server() -> None:
    """A tenant whose package is held may not take the last server too: its next request
    waits, and another tenant's is served meanwhile (it waited behind the first tenant's)."""
    with _CapWatchingSandbox(max_servers=2) as sandbox:
        held, _ = _in_thread(sandbox, "tenant-a")
        _held(sandbox)
        waiting, waiting_answer = _in_thread(sandbox, "tenant-a")
        assert sandbox.capped.wait(_DEADLOCK_S)  # waiting with a server still to start
        assert _extract(sandbox, "tenant-b")["pages"] == ["held"]
        assert waiting_answer == []  # still waiting: tenant-a's first request is held
        sandbox.release.set()
        held.join(_DEADLOCK_S)
        waiting.join(_DEADLOCK_S)
        assert waiting_answer[0]["pages"] == ["held"]
        assert len(sandbox.started) == 2


def test_a_single_server_is_lent_to_any_holder() -> None:
    """With one server a holder may be lent it (the cap is never below one)."""
    with _CountingSandbox(max_servers=1) as sandbox:
        sandbox.release.set()
        assert _extract(sandbox, "tenant-a")["pages"] == ["held"]
        assert _extract(sandbox, "tenant-a")["pages"] == ["held"]
