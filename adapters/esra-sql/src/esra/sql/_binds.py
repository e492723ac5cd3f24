"""Values made bindable as UTF-8 text, whatever the caller's input held.

Terms and filter values come from decoded input, where an undecodable byte survives as a lone
surrogate. No engine can carry one (each speaks UTF-8), and such a value could never equal
stored text anyway, so it is replaced rather than left to fail the bind or the encode.
"""

from __future__ import annotations

__all__ = ["utf8_bindable"]


def utf8_bindable(value: object) -> object:
    """Return ``value`` with a ``str``'s lone surrogates replaced by U+FFFD; others unchanged."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return value
