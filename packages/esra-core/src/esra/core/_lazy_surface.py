"""A package's public names, imported from their modules the first time they are asked for.

``esra.core`` and the adapters' facades name their public surface for type checkers under
``TYPE_CHECKING`` and here for the interpreter (PEP 562), so that importing a package for one
corner of it — a command line, a worker — does not import everything it exports.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(
    package: str, modules: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, whose public names ``modules`` maps
    to the modules defining them; a name found is kept in ``namespace`` (the package's
    globals), so it is imported once.

    Assign them under ``if not TYPE_CHECKING:``: a module ``__getattr__`` a type checker can see
    would let any name type-check, and the typing test must fail on one outside the surface.
    """

    def attribute(name: str) -> Any:
        module = modules.get(name)
        if module is None:
            msg = f"module {package!r} has no attribute {name!r}"
            raise AttributeError(msg)
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def names() -> list[str]:
        return sorted({*namespace.get("__all__", ()), *modules})

    return attribute, names
