"""A real sandbox server started from a test's own script: its readers replaced, the rest
of the server (``_sandbox_server.main``) exactly as deployed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from esra.core._docstore import sandbox
from esra.core._docstore.formats import DocumentFormat
from esra.core._docstore.sandbox import ExtractionSandbox, SandboxLimits

__all__ = ["ScriptedSandbox", "tried"]

_TRY_LIMITS = SandboxLimits(cpu_seconds=30, wall_seconds=60.0)


class ScriptedSandbox(ExtractionSandbox):
    """Sandbox servers each started as ``python -c script *arguments``, with this
    process's import path and in ``cwd`` (this process's working directory by default):
    the script patches what it tests, then runs the server.

    Each server's announcement is kept in ``announced``; it must be a plain ``{"ready":
    true}`` unless ``any_announcement`` (a server started to say what it lacks)."""

    def __init__(
        self,
        script: str,
        *arguments: str,
        max_servers: int = 1,
        cwd: Path | None = None,
        any_announcement: bool = False,
    ) -> None:
        super().__init__(max_servers=max_servers)
        self._command: Sequence[str] = (sys.executable, "-c", script, *arguments)
        self._cwd = cwd
        self._any_announcement = any_announcement
        self.announced: dict[str, object] | None = None

    def _start(self) -> subprocess.Popen[bytes] | None:
        env = {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "PATH": os.defpath}
        server = subprocess.Popen(  # noqa: S603 - our own interpreter and script
            self._command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=self._cwd,
        )
        self.announced = sandbox._announcement(server)
        if not self._any_announcement:
            assert self.announced == {"ready": True}
        return server


def tried(served: ScriptedSandbox, plan: Mapping[str, object]) -> dict[str, str]:
    """What a server's child reported trying for a PDF marked ``TRY`` carrying ``plan``:
    each attempt's name and how it ended, as its script's reader answers them."""
    document = b"TRY " + json.dumps(plan).encode()
    answer = served.extract(document, _TRY_LIMITS, reader=DocumentFormat.PDF)
    assert "refusal" not in answer, answer
    pages = answer["pages"]
    assert isinstance(pages, list)
    outcomes = json.loads(pages[0])
    assert isinstance(outcomes, dict)
    return outcomes
