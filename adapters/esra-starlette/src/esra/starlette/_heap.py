"""Settle a serving process's heap once it is ready, so garbage collection costs calls less.

A host process allocates most of what it will ever hold while it starts (modules, settings,
snapshots, pools), then serves for days. CPython's cyclic collector would walk that start-up
heap again in every full collection, and runs its youngest collection every 700 net
container allocations — a few times per call, each a pause on the one event loop. Measured
on the embedded default under load, collection took about 6 % of the host's CPU. So once the
server listens, ``esra serve`` (and each of its ``--workers``) collects once, moves what
survived into the permanent generation (``gc.freeze``: never scanned again, never freed
either — it lives for the whole process anyway), and raises the youngest generation's
threshold tenfold. Nothing stops being collected: cycles are found as before, a little
later. A library embedding the host keeps the interpreter's settings: only the command
line does this, for a process it owns.
"""

from __future__ import annotations

import gc

__all__ = ["YOUNG_THRESHOLD", "settle_heap"]

# Ten times CPython's default: a young collection every few calls instead of a few per call.
YOUNG_THRESHOLD = 7_000


def settle_heap() -> None:
    """Collect, freeze the surviving start-up heap, and raise the young threshold."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
