"""Stage 2 — select sources: forced ones always, optional ones as the model chooses."""

from __future__ import annotations

import attrs

from esra.core.pipeline.scope import ScopedSource
from esra.core.response import ResponseWarning

__all__ = ["Selection"]


@attrs.frozen
class Selection:
    """The sources to plan for, in scope order, and any warnings selection raised."""

    sources: tuple[ScopedSource, ...]
    warnings: tuple[ResponseWarning, ...] = ()
