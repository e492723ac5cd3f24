"""Masking: render row values as text and hide what a mapping's masking rules protect.

Masking happens before anything derived from a value is built (fragments, size accounting,
rerank items), so a masked value is the only form of it that ever leaves the core.
"""

from __future__ import annotations

from collections.abc import Mapping as AbcMapping
from datetime import date, datetime

from esra.core._config.mapping import Mapping, MaskingKind
from esra.core._query import RowValue

__all__ = ["MASK", "mask", "masked_values", "render_value"]

# Fixed width whatever the value's length, so the mask does not leak how long the value was.
MASK = "****"
_LAST = 4


def mask(value: str, kind: MaskingKind) -> str:
    """Return ``value`` masked according to ``kind``.

    ``FULL`` hides everything; ``LAST4`` keeps the last four characters, but only when the value
    is longer than that (otherwise they would be the whole value); ``EMAIL`` keeps the first
    character of the local part and the domain, and masks fully anything that is not an
    address.
    """
    match kind:
        case MaskingKind.FULL:
            return MASK
        case MaskingKind.LAST4:
            if len(value) <= _LAST:
                return MASK
            return MASK + value[-_LAST:]
        case MaskingKind.EMAIL:
            local, at, domain = value.rpartition("@")
            if not at or not local or not domain:
                return MASK
            return f"{local[0]}{MASK}@{domain}"


def render_value(value: RowValue) -> str | None:
    """Return a row value as response text: dates in ISO format, booleans lowercase.

    ``None`` (no value) stays ``None`` so callers can leave the field out.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime | date):
        return value.isoformat()
    return str(value)


def masked_values(values: AbcMapping[str, RowValue], mapping: Mapping) -> dict[str, str]:
    """Render ``values`` as text with ``mapping``'s masking rules applied.

    Fields without a value are left out. Allowlisting is the caller's job and happens first:
    this function masks whatever it is given.
    """
    rules = {rule.field: rule.kind for rule in mapping.masking}
    rendered: dict[str, str] = {}
    for name, value in values.items():
        text = render_value(value)
        if text is None:
            continue
        kind = rules.get(name)
        rendered[name] = text if kind is None else mask(text, kind)
    return rendered
