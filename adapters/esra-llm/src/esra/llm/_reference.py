"""Reading the prompt's reference items defensively: each is untrusted JSON data."""

from __future__ import annotations

import json
from typing import Any

from esra.core.prompts import Prompt

__all__ = ["integer", "items", "string", "strings"]


def items(prompt: Prompt) -> list[tuple[str, dict[str, Any]]]:
    """Return ``(tag, object)`` for every reference item whose content is a JSON object.

    Anything else is skipped: the model answers from what it can read, never from a guess.
    An item the core built carries the value its content was serialized from (equal to what
    parsing the content gives), read as it is rather than parsed back; an item of text alone
    is parsed. Either way the model only reads it.
    """
    found: list[tuple[str, dict[str, Any]]] = []
    for item in prompt.reference:
        value = item.value
        if value is None:
            try:
                value = json.loads(item.content)
            except (ValueError, RecursionError):
                continue
        if isinstance(value, dict):
            found.append((item.tag, value))
    return found


def string(obj: dict[str, Any], key: str) -> str:
    """Return ``obj[key]`` if it is a string, else ``""``."""
    value = obj.get(key)
    return value if isinstance(value, str) else ""


def strings(obj: dict[str, Any], key: str) -> list[str]:
    """Return the strings in the list ``obj[key]`` (other entries are ignored)."""
    value = obj.get(key)
    if not isinstance(value, list):
        return []
    return [v for v in value if isinstance(v, str)]


def integer(obj: dict[str, Any], key: str, default: int) -> int:
    """Return ``obj[key]`` if it is an integer (not a boolean), else ``default``."""
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        return default
    return value
