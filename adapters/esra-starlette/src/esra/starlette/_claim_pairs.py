"""Claims written as ``NAME=VALUE`` pairs, the way a person types them on a command line or
in a form: one claim per pair, a name given more than once makes a list.

``esra dev-token --claim``, ``esra explain --as`` and the portal's explain form read claims
so; this is their one parser.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["MalformedClaimError", "parse_claim_pairs"]


class MalformedClaimError(ValueError):
    """A pair without ``=`` or with an empty name; ``pair`` is what was given."""

    def __init__(self, pair: str) -> None:
        super().__init__(f"takes NAME=VALUE, not {pair!r}")
        self.pair = pair


def parse_claim_pairs(
    pairs: Iterable[str], *, strip_values: bool = False
) -> dict[str, str | tuple[str, ...]]:
    """The claims ``pairs`` name. Names are stripped of surrounding blanks; values only with
    ``strip_values`` (a form's lines), since a command line's quoting is deliberate.

    Raises:
        MalformedClaimError: a pair is not ``NAME=VALUE``.
    """
    grouped: dict[str, list[str]] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise MalformedClaimError(pair)
        grouped.setdefault(name.strip(), []).append(value.strip() if strip_values else value)
    return {name: v[0] if len(v) == 1 else tuple(v) for name, v in grouped.items()}
