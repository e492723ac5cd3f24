"""Worker processes whose extraction of one document waits for the test (issue 13, item 3).

``gated_command`` builds a ``python -c`` command that replaces the extraction function the
ingestion module calls with one that first appends ``<pid> <title>`` to an extraction log
and, for the document titled ``SLOW``, waits until a release file exists; then it runs the
worker entry point it is given. The hold lasts exactly as long as the test wants, so a
document is "slower than its lease" without any clock in the test, and nothing in
production code knows about it.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from esra.core._docstore.ingestion import upload_files
from esra.core.testing import FakeClock
from esra.sqlite import SqliteDocumentRepository
from esra.starlette._embedded import EMBEDDED_TENANT

SLOW = "slow.md"
# A guard against a hang, never an assertion about speed.
HANG_GUARD_S = 90.0

_WRAPPER = """
import importlib, os, sys, time
from esra.core._docstore import ingestion
slow, release, log, entry = sys.argv[1:5]
real = ingestion.extract
def gated(upload, **kwargs):
    with open(log, "a", encoding="utf-8") as out:
        out.write(f"{os.getpid()} {upload.display_name}\\n")
    if upload.display_name == slow:
        while not os.path.exists(release):
            time.sleep(0.02)
    return real(upload, **kwargs)
ingestion.extract = gated
module, _, function = entry.partition(":")
raise SystemExit(getattr(importlib.import_module(module), function)(sys.argv[5:]))
"""


def gated_command(release: Path, log: Path, entry: str, args: Sequence[str]) -> list[str]:
    """The command running ``entry`` (``module:function`` taking argv) with gated extraction."""
    return [sys.executable, "-c", _WRAPPER, SLOW, str(release), str(log), entry, *args]


def extractions(log: Path) -> Counter[str]:
    """How many times each title was extracted, by any process."""
    if not log.exists():
        return Counter()
    return Counter(line.split(" ", 1)[1] for line in log.read_text().splitlines())


def extracted_by(log: Path, title: str) -> list[int]:
    """The pids that extracted ``title``, in order."""
    if not log.exists():
        return []
    return [
        int(pid)
        for pid, name in (line.split(" ", 1) for line in log.read_text().splitlines())
        if name == title
    ]


def wait_until(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` until it holds (bounded by the hang guard)."""
    deadline = time.monotonic() + HANG_GUARD_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def queue_markdown(database: Path, *names: str) -> None:
    """Upload ``names`` to the embedded store in ``database`` in order (each strictly older
    than the next, so a worker claims them in that order) as Pending."""

    async def upload() -> None:
        repository = SqliteDocumentRepository(database)
        clock = FakeClock(datetime.now(UTC) - timedelta(hours=1))
        try:
            await repository.initialize()
            for name in names:
                body = f"# {name}\n\nThe quokka ledger, entry {name}.\n".encode()
                (outcome,) = await upload_files(
                    repository, EMBEDDED_TENANT, [(name, body)], scope="general", clock=clock
                )
                assert outcome.document is not None
                clock.advance(1)
        finally:
            await repository.close()

    asyncio.run(upload())
