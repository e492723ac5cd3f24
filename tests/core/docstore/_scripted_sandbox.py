"""A real sandbox server started from a test's own script: its readers replaced, the rest
of the server (``_sandbox_server.main``) exactly as deployed."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence

from esra.core._docstore import sandbox
from esra.core._docstore.sandbox import ExtractionSandbox

__all__ = ["ScriptedSandbox"]


class ScriptedSandbox(ExtractionSandbox):
    """Sandbox servers each started as ``python -c script *arguments``, with this
    process's import path: the script patches what it tests, then runs the server."""

    def __init__(self, script: str, *arguments: str, max_servers: int = 1) -> None:
        super().__init__(max_servers=max_servers)
        self._command: Sequence[str] = (sys.executable, "-c", script, *arguments)

    def _start(self) -> subprocess.Popen[bytes] | None:
        env = {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "PATH": os.defpath}
        server = subprocess.Popen(  # noqa: S603 - our own interpreter and script
            self._command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        assert sandbox._announcement(server) == {"ready": True}
        return server
