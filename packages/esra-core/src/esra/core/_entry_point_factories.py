"""Factories registered by installed distributions under an entry-point group, by kind.

Providers (``esra.providers``) and document stores (``esra.document_stores``) are both
opened by a factory an adapter distribution registers under the kind it opens. This module
is the one place that reads such a group: an entry point's name is the kind, its value the
factory; the same name pointing at the same object twice (a distribution whose metadata is
found on two paths) is one registration, while two different objects for one name are a
conflict for the caller to refuse.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Iterable

__all__ = ["describe_factory", "installed_kinds", "load_factories"]


def load_factories(
    group: str,
    *,
    what: str,
    duplicate: Callable[[str, str, str], Exception],
    invalid: Callable[[str], Exception],
    entry_points: Iterable[importlib.metadata.EntryPoint] | None = None,
) -> list[tuple[str, object]]:
    """Every ``(kind, factory)`` registered in ``group``, sorted by kind.

    Args:
        group: the entry-point group.
        what: what a factory of the group is, for ``invalid``'s message.
        duplicate: builds the error for two different factories of one kind
            (``kind, first, second``).
        invalid: builds the error for an entry point that is not a factory (its message).
        entry_points: the entry points to read instead of the installed ones (tests).

    Raises:
        Exception: ``duplicate(...)`` for two different factories claiming one kind,
            ``invalid(...)`` for an entry point that does not load to a callable.
    """
    found = (
        importlib.metadata.entry_points(group=group)
        if entry_points is None
        else [each for each in entry_points if each.group == group]
    )
    loaded: list[tuple[str, object]] = []
    targets: dict[str, str] = {}
    for entry in sorted(found, key=lambda each: (each.name, each.value)):
        if entry.name in targets:
            if targets[entry.name] == entry.value:
                continue
            raise duplicate(entry.name, targets[entry.name], entry.value)
        factory = entry.load()
        if not callable(factory):
            raise invalid(f"entry point {entry.name!r} ({entry.value}) is not a {what}")
        targets[entry.name] = entry.value
        loaded.append((entry.name, factory))
    return loaded


def installed_kinds(group: str) -> frozenset[str]:
    """The kinds the installed distributions register in ``group``, without importing them."""
    return frozenset(entry.name for entry in importlib.metadata.entry_points(group=group))


def describe_factory(factory: object) -> str:
    """``module:qualname`` of a factory, for conflict messages."""
    module = getattr(factory, "__module__", None) or type(factory).__module__
    name = getattr(factory, "__qualname__", None) or type(factory).__qualname__
    return f"{module}:{name}"
