"""``esra serve`` settles its heap once it listens; an embedded HostServer leaves it alone.

Each check runs in a fresh interpreter: the collector's settings belong to the process.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from esra.starlette._cli import build_parser, host_server

# Starts a HostServer on the embedded default in a thread of a fresh interpreter, waits
# until it listens, and prints the collector's state then.
_PROBE = """
import asyncio, gc, json, sys, tempfile, threading
from pathlib import Path
from esra.starlette._parts import open_embedded
from esra.starlette._serve import HostServer, free_port

settle = sys.argv[1] == "settle"
before = gc.get_threshold()
with tempfile.TemporaryDirectory() as tmp:
    server = HostServer(
        lambda: open_embedded(Path(tmp)), port=free_port(), log_level="warning", settle_heap=settle
    )
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    assert server.started.wait(60), "the server did not start"
    state = {"before": before, "after": gc.get_threshold(), "frozen": gc.get_freeze_count()}
    server.stop()
    thread.join(60)
print(json.dumps(state))
"""


def _probe(mode: str) -> dict[str, list[int] | int]:
    done = subprocess.run(  # noqa: S603 - this interpreter, a fixed script
        [sys.executable, "-c", textwrap.dedent(_PROBE), mode],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    state: dict[str, list[int] | int] = json.loads(done.stdout.strip().splitlines()[-1])
    return state


def test_a_settled_server_froze_its_start_up_heap_and_raised_the_young_threshold() -> None:
    """Once listening, the start-up heap is in the permanent generation and the young
    generation is collected ten times less often; the older thresholds are unchanged."""
    state = _probe("settle")
    before, after = state["before"], state["after"]
    assert isinstance(before, list)
    assert after == [7_000, *before[1:]]
    assert isinstance(state["frozen"], int)
    assert state["frozen"] > 10_000


def test_an_embedded_server_leaves_the_interpreter_as_it_was() -> None:
    """Without ``settle_heap`` (the default for embedders) nothing is frozen or changed."""
    state = _probe("leave")
    assert state["after"] == state["before"]
    assert state["frozen"] == 0


def test_esra_serve_settles_its_heap() -> None:
    """The command line asks for it, with or without settings."""
    server = host_server(build_parser().parse_args(["serve", "--port", "0"]))
    assert server._settle_heap is True
