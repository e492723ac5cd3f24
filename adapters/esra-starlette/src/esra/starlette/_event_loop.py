"""The event loop a serving process runs on: uvloop's when it is installed, else asyncio's.

uvicorn chooses so itself (``loop="auto"``) when it creates the loop; ``esra serve`` creates
the loop itself — its parts open before uvicorn starts — so it makes the same choice here.
uvicorn's ``http="auto"`` likewise takes httptools' parser when installed. Both come with
the ``speedups`` extra (``pip install 'esra-starlette[speedups]'``); without it the host runs
on asyncio and h11, as before. Nothing a caller sees depends on the choice: the same
routes, checks and answers, at less CPU per call.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["run_serving", "serving_loop_factory"]

T = TypeVar("T")


def serving_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop factory when uvloop is installed, else ``None`` (asyncio's default)."""
    try:
        uvloop = importlib.import_module("uvloop")  # optional: the speedups extra
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def run_serving(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run ``main()`` to completion on a new loop of the serving kind, as ``asyncio.run``."""
    with asyncio.Runner(loop_factory=serving_loop_factory()) as runner:
        return runner.run(main())
