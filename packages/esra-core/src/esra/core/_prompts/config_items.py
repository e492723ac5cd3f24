"""Reference items made from configuration alone, remembered per configuration object.

The selection prompt describes each candidate source and the planning prompt each source's
mappings: text that depends on nothing but the (immutable) configuration objects, yet was
stripped of markers and serialized to JSON again on every invocation. A snapshot's objects
live as long as the snapshot is served, so an item is remembered under the identity of the
objects it was made from, and each remembered entry holds those objects, so their ids cannot
be reused by others while it exists. What a prompt holds is exactly what building it anew
would give: the same tag, JSON text and value.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Hashable

from esra.core._prompts.model import ReferenceItem

__all__ = ["ConfigItems"]


class ConfigItems:
    """A bounded memo of reference items, keyed by the configuration objects they describe.

    Args:
        limit: how many items to keep; the oldest is forgotten first (items of a snapshot
            no longer served age out as the new one's are made).
    """

    def __init__(self, limit: int = 4096) -> None:
        if limit < 1:
            msg = "limit must be at least 1"
            raise ValueError(msg)
        self._limit = limit
        # key -> (the objects it was made from, kept alive; the item)
        self._items: dict[Hashable, tuple[tuple[object, ...], ReferenceItem]] = {}

    def __len__(self) -> int:
        return len(self._items)

    def item(
        self,
        objects: tuple[object, ...],
        settings: tuple[Hashable, ...],
        make: Callable[[], ReferenceItem],
    ) -> ReferenceItem:
        """The item ``make`` builds from ``objects`` (immutable configuration) and plain
        ``settings`` values, built once while remembered."""
        key = (*(id(o) for o in objects), *settings)
        kept = self._items.get(key)
        if kept is not None and all(a is b for a, b in zip(kept[0], objects, strict=True)):
            return kept[1]
        made = make()
        if len(self._items) >= self._limit:
            # Another thread may have emptied it meanwhile: then there is nothing to forget.
            with contextlib.suppress(StopIteration, KeyError, RuntimeError):
                del self._items[next(iter(self._items))]
        self._items[key] = (objects, made)
        return made
