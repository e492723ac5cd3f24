"""A sandbox child that runs hostile code is still held to its limits by the server.

Each test runs the real server loop (``_sandbox_server.main``) in a forked process of its
own, with its reader replaced by the hostile work a crafted document could make pypdf or
python-docx do: the server, its children and their children are all real processes.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import select
import signal
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from esra.core._docstore import _landlock, _sandbox_server, _seccomp
from esra.core._docstore.sandbox import SandboxUnavailableError, answer_refusal

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the server's containment is Linux's"
)

Reader = Callable[[bytes, int, Mapping[str, Any]], dict[str, object]]
# How long the test waits for any answer: a server that never answers fails, never hangs.
_ANSWER_TIMEOUT_S = 120.0
_STOP_POLLS = 100


class _Server:
    """The real server loop in a forked process, serving every reader with ``reader``;
    without its children's system-call filter and file restriction when ``syscall_filter``
    is false."""

    def __init__(self, reader: Reader, *, syscall_filter: bool = True) -> None:
        to_server, self._requests = os.pipe()
        self._answers, from_server = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # pragma: no cover - the server process, which never returns
            os.close(self._requests)
            os.close(self._answers)
            try:
                _sandbox_server._readers = lambda: ({"pdf": reader}, [])
                if not syscall_filter:
                    _seccomp.confine = lambda: False
                    _landlock.confine = lambda ruleset: False
                sys.stdin = os.fdopen(to_server, "r")
                sys.stdout = os.fdopen(from_server, "w")
                _sandbox_server.main()
            finally:
                os._exit(0)
        os.close(to_server)
        os.close(from_server)
        self._pending = b""
        assert self._line() == {"ready": True}

    def _line(self) -> dict[str, Any]:
        while b"\n" not in self._pending:
            ready, _, _ = select.select([self._answers], [], [], _ANSWER_TIMEOUT_S)
            assert ready, "the server did not answer"
            chunk = os.read(self._answers, 1 << 16)
            assert chunk, "the server died"
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        answer = json.loads(line)
        assert isinstance(answer, dict)
        return answer

    def request(self, data: bytes, **limits: Any) -> dict[str, Any]:
        header = {"reader": "pdf", "size": len(data), "options": {}}
        header |= {"memory": 768 << 20, "cpu": 30, "wall": 30.0, "chars": 1 << 20} | limits
        os.write(self._requests, json.dumps(header).encode() + b"\n" + data)
        return self._line()

    def close(self) -> None:
        """End the server as its owner does: close its input, and kill it if it lingers (a
        server stuck on a child must not hang the suite)."""
        os.close(self._requests)
        for _ in range(_STOP_POLLS):
            if os.waitpid(self.pid, os.WNOHANG)[0]:
                break
            time.sleep(0.1)
        else:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        os.close(self._answers)


@contextlib.contextmanager
def serve(reader: Reader, *, syscall_filter: bool = True) -> Iterator[_Server]:
    server = _Server(reader, syscall_filter=syscall_filter)
    try:
        yield server
    finally:
        server.close()


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a process that has not ended (a zombie has ended)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()[0] != b"Z"
    except FileNotFoundError:
        return False


def _answer_pipe() -> int:
    """The child's end of its answer pipe (the reader is handed no descriptor: a hostile one
    would find it the same way, in its caller's frame)."""
    frame = sys._getframe(2)
    assert frame.f_code.co_name == "_child"
    write_fd = frame.f_locals["write_fd"]
    assert isinstance(write_fd, int)
    return write_fd


def _sleeper(*, new_session: bool) -> int:
    """Fork a process that sleeps (holding the document and the answer pipe); its pid."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the grandchild
        if new_session:
            os.setsid()  # out of the child's process group and session
        time.sleep(3600)
        os._exit(0)
    return pid


# 1. The answer's size is bounded at the server.


def _endless_answer(_data: bytes, _chars: int, _options: Mapping[str, Any]) -> dict[str, object]:
    fd = _answer_pipe()
    block = b" " * (1 << 16)  # whitespace: valid JSON, however long
    while True:
        os.write(fd, block)


def test_the_server_stops_reading_an_answer_at_its_cap() -> None:
    with serve(_endless_answer) as server:
        answer = server.request(b"", chars=1000)
        assert answer["refusal"] == "MALFORMED_DOCUMENT"
        assert "size limit" in answer["detail"]


def _longest_honest_answer(
    _data: bytes, chars: int, _options: Mapping[str, Any]
) -> dict[str, object]:
    # Every character at its longest JSON (an astral one, twelve bytes escaped).
    return {"pages": ["\U0001f600" * (chars - 1)]}


def test_an_honest_answer_at_the_character_limit_is_under_the_cap() -> None:
    with serve(_longest_honest_answer) as server:
        answer = server.request(b"", chars=1000)
        assert answer["pages"] == ["\U0001f600" * 999]


# 2. Nothing the child started outlives it.
#
# Where children are filtered (``_seccomp``) they can start nothing: fork is refused, and so
# is writing the file these readers record their pids in (which the file restriction,
# ``_landlock``, refuses too). The subreaper is what holds them where there is no filter
# (another architecture, a kernel refusing it), so these tests run the server without
# either; their refusals are tested in test_sandbox_containment_*.


def _answer_leaving_sleepers(
    _data: bytes, _chars: int, _options: Mapping[str, Any]
) -> dict[str, object]:
    pids = [_sleeper(new_session=False), _sleeper(new_session=True)]
    return {"pages": [str(pid) for pid in pids]}


def test_processes_the_child_forked_end_with_it() -> None:
    with serve(_answer_leaving_sleepers, syscall_filter=False) as server:
        answer = server.request(b"")
        pids = [int(pid) for pid in answer["pages"]]
        assert len(pids) == 2
        assert not any(_alive(pid) for pid in pids)


def _hang_after_forking(path: Path) -> Reader:
    def reader(_data: bytes, _chars: int, _options: Mapping[str, Any]) -> dict[str, object]:
        pids = [_sleeper(new_session=False), _sleeper(new_session=True)]
        path.write_text(" ".join(map(str, pids)))
        time.sleep(3600)
        return {}

    return reader


def test_the_wall_clock_kill_reaches_what_the_child_forked(tmp_path: Path) -> None:
    pids_file = tmp_path / "pids"
    with serve(_hang_after_forking(pids_file), syscall_filter=False) as server:
        answer = server.request(b"", wall=2.0)
        assert answer["detail"] == "extraction exceeded its time limit"
        pids = [int(pid) for pid in pids_file.read_text().split()]
        assert len(pids) == 2
        assert not any(_alive(pid) for pid in pids)


def _close_answer_and_sleep(
    _data: bytes, _chars: int, _options: Mapping[str, Any]
) -> dict[str, object]:
    os.close(_answer_pipe())
    time.sleep(3600)
    return {}


def test_a_child_that_closes_its_answer_is_still_held_to_the_wall_clock() -> None:
    with serve(_close_answer_and_sleep) as server:
        answer = server.request(b"", wall=2.0)
        assert answer["detail"] == "extraction exceeded its time limit"


# 3. A kill from outside is told from the child's own limits and crashes.


def _killed_from_outside(
    _data: bytes, _chars: int, _options: Mapping[str, Any]
) -> dict[str, object]:
    os.kill(os.getpid(), signal.SIGKILL)  # to the server, as the OOM killer's kill
    return {}


def test_a_child_killed_from_outside_is_retried_not_failed_for_good() -> None:
    with serve(_killed_from_outside) as server:
        answer = server.request(b"")
        assert answer["sandbox_retry"] is True
        assert isinstance(answer_refusal(answer), SandboxUnavailableError)


def _spin(_data: bytes, _chars: int, _options: Mapping[str, Any]) -> dict[str, object]:
    while True:
        pass


def test_a_child_at_its_cpu_limit_fails_as_malformed_for_good() -> None:
    with serve(_spin) as server:
        answer = server.request(b"", cpu=1)
        assert answer["detail"] == "extraction exceeded its CPU limit"
        refused = answer_refusal(answer)
        assert not isinstance(refused, SandboxUnavailableError)
        assert refused.refusal.value == "MALFORMED_DOCUMENT"


def _crash(_data: bytes, _chars: int, _options: Mapping[str, Any]) -> dict[str, object]:
    faulthandler.disable()  # pytest's would print the crash's stack: it is not the test's
    os.kill(os.getpid(), signal.SIGSEGV)
    return {}


def test_a_crashed_child_fails_as_malformed_for_good() -> None:
    with serve(_crash) as server:
        answer = server.request(b"")
        assert answer["detail"] == f"extractor died ({int(signal.SIGSEGV)})"
        assert not isinstance(answer_refusal(answer), SandboxUnavailableError)


def _claims_a_retry(_data: bytes, _chars: int, _options: Mapping[str, Any]) -> dict[str, object]:
    return {"refusal": "MALFORMED_DOCUMENT", "sandbox_retry": True}


def test_a_child_cannot_claim_a_retry() -> None:
    with serve(_claims_a_retry) as server:
        answer = server.request(b"")
        assert answer["sandbox_retry"] is False
        assert not isinstance(answer_refusal(answer), SandboxUnavailableError)


# 4. A child inherits no earlier document.


_EARLIER = "first-document"


def _holds(value: object) -> bool:
    """Whether ``value``, or a string, bytes or container directly in it, holds _EARLIER."""
    if isinstance(value, str):
        return _EARLIER in value
    if isinstance(value, bytes | bytearray):
        return _EARLIER.encode() in value
    if isinstance(value, Mapping):
        return any(_holds(item) for item in value.values() if not isinstance(item, Mapping))
    if isinstance(value, list | tuple):
        return any(_holds(item) for item in value if not isinstance(item, list | tuple))
    return False


def _inherited(data: bytes, _chars: int, _options: Mapping[str, Any]) -> dict[str, object]:
    """The document's text, and whether an earlier document (or its text) is still
    referenced by a frame of the stack this child inherited from its server."""
    if _EARLIER.encode() in data:
        return {"pages": [f"{data.decode()}-text"]}
    frames: list[FrameType] = []
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    held = any(_holds(v) for f in frames for v in f.f_locals.values())
    return {"pages": [f"{data.decode()}-text", *(["earlier document held"] if held else [])]}


def test_the_next_child_inherits_no_earlier_document_or_its_text() -> None:
    with serve(_inherited) as server:
        assert server.request(b"first-document")["pages"] == ["first-document-text"]
        assert server.request(b"second-document")["pages"] == ["second-document-text"]
