"""Masking: render row values as text and hide what a mapping's masking rules protect.

Masking happens before anything derived from a value is built (fragments, size accounting,
rerank items), so a masked value is the only form of it that ever leaves the core.
"""

from __future__ import annotations

import re
from collections.abc import Mapping as AbcMapping
from collections.abc import Sequence
from datetime import date, datetime

from esra.core._config.mapping import Mapping, MaskingKind
from esra.core._encodable import encodable
from esra.core._query import RowValue

__all__ = ["MASK", "PART_SEPARATOR", "mask", "masked_record", "masked_values", "render_value"]

# Fixed width whatever the value's length, so the mask does not leak how long the value was.
MASK = "****"
_LAST = 4
# A domain as DNS carries it: at least two dot-separated labels of ASCII letters, digits and
# inner hyphens, each at most 63 characters. The EMAIL rule returns the domain unmasked, so
# only text of that shape may be returned: anything looser lets notes, numbers or a sentence
# after an "@" through. Internationalised domains qualify in their ASCII (``xn--``) form only;
# their Unicode form is masked whole, because allowing "letters" of every script would also
# allow full-width dots, look-alike and invisible characters that no DNS name contains, and
# masking too much is the safe failure of a mask.
_DNS_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_DOMAIN = re.compile(rf"{_DNS_LABEL}(?:\.{_DNS_LABEL})+")
_MAX_DOMAIN_CHARS = 253

# Parts of one record (rows sharing a key, ordered by ``part_order_column``: the store's
# segments) are consecutive slices of one text, whitespace included, so they are concatenated
# as they are: a separator would make the fetched text differ from the document, and its
# total from the document's length.
PART_SEPARATOR = ""


def mask(value: str, kind: MaskingKind) -> str:
    """Return ``value`` masked according to ``kind``.

    ``FULL`` hides everything; ``LAST4`` keeps the last four characters, but only when the value
    is longer than that (otherwise they would be the whole value); ``EMAIL`` keeps the first
    character of the local part and the domain, and masks fully anything that is not an
    address: a value is kept in part only when it is one ``local@domain`` with no whitespace
    or invisible character anywhere and a DNS domain (ASCII labels, at least one dot) after
    its last "@".
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
            if not at or not local or not _is_single_address(value, domain):
                return MASK
            return f"{local[0]}{MASK}@{domain}"


def _is_single_address(value: str, domain: str) -> bool:
    # Whitespace means more than one word: an address with a note after it, or a sentence
    # around one. Control and zero-width characters have no place in an address and could
    # hide what follows them. ``isprintable`` refuses all of these except the ASCII space.
    if not value.isprintable() or any(ch.isspace() for ch in value):
        return False
    return len(domain) <= _MAX_DOMAIN_CHARS and _DOMAIN.fullmatch(domain) is not None


def render_value(value: RowValue) -> str | None:
    """Return a row value as response text: dates in ISO format, booleans lowercase, each
    lone surrogate U+FFFD.

    ``None`` (no value) stays ``None`` so callers can leave the field out.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime | date):
        return value.isoformat()
    # A lone surrogate (a driver decoding UTF-16 that holds one) has no UTF-8 form: kept, it
    # fails the whole response or fetch when the host encodes it. One U+FFFD each keeps every
    # length, so masking and fetch offsets are unchanged.
    return encodable(str(value))


def masked_values(values: AbcMapping[str, RowValue], mapping: Mapping) -> dict[str, str]:
    """Render one row's ``values`` as text with ``mapping``'s masking rules applied.

    Fields without a value are left out. Allowlisting is the caller's job and happens first:
    this function masks whatever it is given. In a mapping of ordered parts a row is one
    part, and its content fields hold a slice of the record's value, not the value: a masked
    content field is masked ``FULL`` there, since the slice's last four characters or
    address are not the value's (a search matching each part in turn would read them all
    out). ``masked_record`` masks a whole record's parts as one value.
    """
    rules = _rules(mapping)
    if mapping.part_order_column is not None:
        rules |= {name: MaskingKind.FULL for name in rules if name in mapping.content_fields}
    return _masked(values, rules)


def masked_record(
    parts: Sequence[AbcMapping[str, RowValue]], mapping: Mapping
) -> list[dict[str, str]]:
    """Render the parts of one record (in order) with ``mapping``'s masking rules applied to
    the record's values, not to each part's.

    A masked content field's value is its parts' text joined (``PART_SEPARATOR``), masked
    once, and given in the first part that holds the field: ``LAST4`` keeps the record's last
    four characters, ``FULL`` is one fixed-width mask, so neither the parts' tails nor their
    number show. Every other field is masked part by part, as ``masked_values`` does for a
    record of one row.
    """
    rules = _rules(mapping)
    joined = {name: kind for name, kind in rules.items() if name in mapping.content_fields}
    rendered = [
        _masked(values, {n: k for n, k in rules.items() if n not in joined}) for values in parts
    ]
    for name, kind in joined.items():
        holders = [part for part in rendered if name in part]
        if not holders:
            continue
        whole = PART_SEPARATOR.join(part.pop(name) for part in holders)
        holders[0][name] = mask(whole, kind)
    return rendered


def _rules(mapping: Mapping) -> dict[str, MaskingKind]:
    # Two rules for one field that disagree (``full`` and ``last4``, say) mask it ``FULL``:
    # whichever came last must not reveal what the other hides.
    rules: dict[str, MaskingKind] = {}
    for rule in mapping.masking:
        known = rules.get(rule.field)
        rules[rule.field] = rule.kind if known in (None, rule.kind) else MaskingKind.FULL
    return rules


def _masked(
    values: AbcMapping[str, RowValue], rules: AbcMapping[str, MaskingKind]
) -> dict[str, str]:
    rendered: dict[str, str] = {}
    for name, value in values.items():
        text = render_value(value)
        if text is None:
            continue
        kind = rules.get(name)
        rendered[name] = text if kind is None else mask(text, kind)
    return rendered
