"""Real ``esra`` processes for the tests that cross processes: start, wait, stop, kill.

``serve_process`` starts ``esra serve`` with the given options on a free loopback port, waits
until ``/healthz`` answers and, when the block ends, stops it the way the test asks: SIGINT
(``stop="interrupt"``, as Ctrl-C would — a clean shutdown) or SIGKILL (``stop="kill"``,
unless the test already stopped it). Output is appended to ``log``, which start-up failures
quote.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import attrs
import pytest

from esra.starlette._serve import free_port

__all__ = ["START_TIMEOUT_S", "ServeHost", "esra_argv", "kill_9", "serve_process"]

START_TIMEOUT_S = 120.0  # a safety net for a slow machine, not a measurement


def esra_argv(*argv: str) -> list[str]:
    """The command line running ``esra *argv`` with this interpreter."""
    return [sys.executable, "-m", "esra.starlette._cli", *argv]


@attrs.define
class ServeHost:
    """A running ``esra serve`` on 127.0.0.1."""

    process: subprocess.Popen[bytes]
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def wait_until_listening(
    process: subprocess.Popen[bytes], port: int, log: Path | None = None
) -> None:
    """Return once ``/healthz`` answers 200; fail the test if the process exits first or
    does not answer within ``START_TIMEOUT_S``."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            shown = log.read_text(errors="replace") if log is not None else ""
            pytest.fail(f"esra serve exited during start-up\n{shown}")
        with contextlib.suppress(OSError):
            probe = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            try:
                probe.request("GET", "/healthz")
                if probe.getresponse().status == 200:
                    return
            finally:
                probe.close()
        time.sleep(0.2)
    pytest.fail("esra serve did not start listening")


@contextlib.contextmanager
def serve_process(
    log: Path,
    *options: str,
    env: dict[str, str] | None = None,
    stop: Literal["interrupt", "kill"] = "kill",
) -> Iterator[ServeHost]:
    """``esra serve *options`` until the block ends; see the module docstring."""
    port = free_port()
    argv = esra_argv("serve", "--port", str(port), *options)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    with log.open("ab") as sink:
        process = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, env=env)  # noqa: S603
        try:
            wait_until_listening(process, port, log)
            yield ServeHost(process, port)
        finally:
            if process.poll() is None:
                if stop == "interrupt":
                    process.send_signal(signal.SIGINT)
                    try:
                        process.wait(timeout=60)
                    except subprocess.TimeoutExpired:
                        process.kill()
                else:
                    process.kill()
            process.wait()


def kill_9(host: ServeHost) -> None:
    """SIGKILL: no shutdown, no flush, no close."""
    host.process.send_signal(signal.SIGKILL)
    assert host.process.wait(timeout=60) == -signal.SIGKILL
