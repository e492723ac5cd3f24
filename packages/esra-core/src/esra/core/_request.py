"""RetrievalRequest: what a caller asks one invocation for — the prompt, its own filters on
business fields, and how many results it wants at most.

Everything about the request crosses into the core in this one value, so a host only
translates its transport's arguments into it: the core applies ``top_k`` before the answer
is composed (an answer can then only cite what the caller receives) and keys the result
cache on it, instead of a host trimming a finished response and re-deciding its answer.
"""

from __future__ import annotations

import attrs

from esra.core._query import PlannedFilter

__all__ = ["RetrievalRequest"]


@attrs.frozen
class RetrievalRequest:
    """One search as the caller asked for it.

    Attributes:
        prompt: the caller's question (1 to ``Retriever.MAX_REQUEST_CHARS`` characters).
        filters: the caller's own conditions on business fields, ANDed into every search
            and validated like the planner's (``esra.core._pipeline.caller_filters``).
        top_k: at most this many results; never more than the exposure's own top-K
            (``None``: the exposure's).
    """

    prompt: str
    filters: tuple[PlannedFilter, ...] = ()
    top_k: int | None = None
