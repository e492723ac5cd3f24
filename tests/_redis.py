"""A private ``redis-server`` a test can kill, pause and start again (``RedisProcess``).

Shared by the Redis adapter tests and the scale-out tests that run real host processes on
one Redis; it keeps nothing on disk.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time

import pytest
import redis

__all__ = ["REDIS_SERVER", "RedisProcess", "free_port"]

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (at the time of asking)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class RedisProcess:
    """A private ``redis-server`` on one port, which a test can kill and start again."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.url = f"redis://127.0.0.1:{port}/0"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the server and wait (up to 10 s) until it answers PING."""
        self._process = subprocess.Popen(  # noqa: S603 - a fixed local binary and arguments
            [
                REDIS_SERVER,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10.0
        while True:
            try:
                with redis.Redis(port=self.port, socket_connect_timeout=0.5) as probe:
                    probe.ping()
                return
            except (redis.RedisError, OSError):
                if time.monotonic() > deadline or self._process.poll() is not None:
                    self.kill()
                    pytest.fail(f"redis-server did not start on port {self.port}")
                time.sleep(0.05)

    def pause(self) -> None:
        """Stop the server (SIGSTOP): connections stay open, nothing is answered."""
        assert self._process is not None
        self._process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """Let a paused server go on (SIGCONT), answering what it was sent meanwhile."""
        assert self._process is not None
        self._process.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        """Kill the server at once (SIGKILL): its clients see their connections drop."""
        if self._process is not None:
            self._process.kill()
            self._process.wait(timeout=10)
            self._process = None
