"""The serving process's loop: uvloop's when the speedups extra installed it, else asyncio's."""

from __future__ import annotations

import asyncio
import sys
import types

import pytest

from esra.starlette._event_loop import run_serving, serving_loop_factory


class _RecordingLoops:
    """Stands in for uvloop: makes asyncio loops, counting them."""

    def __init__(self) -> None:
        self.made: list[asyncio.AbstractEventLoop] = []

    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.new_event_loop()
        self.made.append(loop)
        return loop


def _fake_uvloop(monkeypatch: pytest.MonkeyPatch) -> _RecordingLoops:
    loops = _RecordingLoops()
    module = types.ModuleType("uvloop")
    module.new_event_loop = loops.new_event_loop  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "uvloop", module)
    return loops


def test_with_uvloop_installed_the_host_serves_on_its_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loops = _fake_uvloop(monkeypatch)
    assert serving_loop_factory() == loops.new_event_loop

    async def main() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    ran_on = run_serving(main)
    assert loops.made == [ran_on]
    assert ran_on.is_closed()


def test_without_uvloop_the_host_serves_on_asyncios_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # None in sys.modules makes the import fail, as an absent package does.
    monkeypatch.setitem(sys.modules, "uvloop", None)
    assert serving_loop_factory() is None

    async def main() -> str:
        await asyncio.sleep(0)
        return type(asyncio.get_running_loop()).__module__

    assert run_serving(main).startswith("asyncio")


def test_a_failure_inside_the_served_coroutine_leaves_as_it_came(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loops = _fake_uvloop(monkeypatch)

    async def main() -> None:
        msg = "parts failed to open"
        raise RuntimeError(msg)

    with pytest.raises(RuntimeError, match="parts failed to open"):
        run_serving(main)
    assert all(loop.is_closed() for loop in loops.made)
