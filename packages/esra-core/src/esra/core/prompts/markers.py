"""Structural markers around untrusted content, and the stripping that keeps them unforgeable."""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["MARKER_TOKEN", "begin_marker", "end_marker", "strip_markers", "wrap_untrusted"]

MARKER_TOKEN = "ESRA-DATA"
_TOKEN = re.compile(r"(?i)(?:end-)?esra-data")
# Characters that could hide a token from the pattern above (zero-width joiners and friends).
_INVISIBLE = re.compile("[\u200b-\u200f\u2060-\u2064\ufeff\u00ad]")
_SUSPECT = re.compile("(?i)esra-data|[\u200b-\u200f\u2060-\u2064\ufeff\u00ad]")


def begin_marker(tag: str) -> str:
    """Return the marker that opens the untrusted item ``tag``."""
    return f"<<{MARKER_TOKEN} id={tag}>>"


def end_marker(tag: str) -> str:
    """Return the marker that closes the untrusted item ``tag``."""
    return f"<<END-{MARKER_TOKEN} id={tag}>>"


def strip_markers(text: str) -> str:
    """Remove every occurrence of the marker token so content cannot forge a boundary.

    Repeats until nothing changes, so removing one occurrence can never assemble another
    (``esra-esra-datadata`` → ``esra-data`` → ``""``).
    """
    if text.isascii() and "esra-data" not in text.lower():
        # The common case — ASCII (so no invisible character) and no token — stays cheap:
        # a case-insensitive regex scan costs about twenty times more on the hot path.
        return text
    if not _SUSPECT.search(text):
        return text
    previous = None
    current = text
    while previous != current:
        previous = current
        current = _TOKEN.sub("", _INVISIBLE.sub("", current))
    return current


def _strip_all(value: Any) -> Any:
    if isinstance(value, str):
        return strip_markers(value)
    if isinstance(value, dict):
        return {strip_markers(str(k)): _strip_all(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_strip_all(v) for v in value]
    return value


def wrap_untrusted(tag: str, payload: Any) -> tuple[str, str]:
    """Serialize ``payload`` as JSON with every string stripped of markers.

    Returns the tag (also stripped, so a tag can never close another item) and the JSON text.
    """
    safe_tag = re.sub(r"[^A-Za-z0-9_.:-]", "", strip_markers(tag))
    return safe_tag, json.dumps(_strip_all(payload), ensure_ascii=False, sort_keys=True)
