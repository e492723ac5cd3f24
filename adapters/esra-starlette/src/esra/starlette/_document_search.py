"""Reading a management search from query parameters, for the admin API and the Portal.

Parameters: ``q`` (text), ``state`` and ``type`` (repeatable: a document state, a format),
``scope``, ``uploader`` (the subject that uploaded it, exactly), ``since`` (inclusive) and
``until`` (exclusive) as ISO-8601 times with an offset, ``limit`` (1–200) and ``cursor`` (a
page's ``nextCursor``). Each other parameter may be given
once; an empty value is no filter (an HTML form submits its blank fields). Anything else —
an unknown or repeated parameter, a malformed value — is a ``DocumentSearchError`` naming
the parameter, which each surface answers as its own 400.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from esra.core.docstore import (
    DEFAULT_SEARCH_LIMIT,
    MAX_SEARCH_LIMIT,
    DocumentCursor,
    DocumentFormat,
    DocumentSearch,
    DocumentSearchError,
    DocumentState,
)

__all__ = ["SEARCH_PARAMETERS", "document_search_of"]

_REPEATABLE = frozenset({"state", "type"})
_SINGLE = frozenset({"q", "scope", "uploader", "since", "until", "limit", "cursor"})
SEARCH_PARAMETERS = _REPEATABLE | _SINGLE
# Longer than any valid value (text 200, scope and uploader 256, cursor 1024): refused
# before parsing.
_MAX_PARAM_CHARS = 2048


def _time(name: str, text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise DocumentSearchError(name, f"{name} is not an ISO-8601 time.") from None
    if moment.tzinfo is None:
        raise DocumentSearchError(
            name, f"{name} needs a UTC offset (for example 2026-03-01T09:00:00Z)."
        )
    return moment


def _limit(text: str | None) -> int:
    if text is None:
        return DEFAULT_SEARCH_LIMIT
    if not text.isascii() or not text.isdigit() or len(text) > 4:
        raise DocumentSearchError("limit", f"limit is a whole number from 1 to {MAX_SEARCH_LIMIT}.")
    return int(text)


def _choices(name: str, values: list[str], allowed: Iterable[str]) -> list[str]:
    names = list(allowed)
    for value in values:
        if value not in names:
            raise DocumentSearchError(
                name, f"Unknown {name} {value!r}; use one of {', '.join(names)}."
            )
    return values


def document_search_of(params: Iterable[tuple[str, str]]) -> DocumentSearch:
    """The search ``params`` describe (the tenant is the caller's, never a parameter).

    Raises:
        DocumentSearchError: an unknown, repeated or malformed parameter, named.
    """
    single: dict[str, str] = {}
    given: set[str] = set()
    repeated: dict[str, list[str]] = {name: [] for name in _REPEATABLE}
    for name, value in params:
        if name not in SEARCH_PARAMETERS:
            shown = name if name.isprintable() and len(name) <= 32 else "parameter"
            raise DocumentSearchError(
                shown,
                f"Unknown query parameter {shown!r}; use {', '.join(sorted(SEARCH_PARAMETERS))}.",
            )
        if len(value) > _MAX_PARAM_CHARS:
            raise DocumentSearchError(name, f"{name} is too long.")
        if name in _REPEATABLE:
            if value:
                repeated[name].append(value)
            continue
        if name in given:
            raise DocumentSearchError(name, f"{name} may be given once.")
        given.add(name)
        if value:
            single[name] = value
    states = _choices("state", repeated["state"], (s.value for s in DocumentState))
    formats = _choices("type", repeated["type"], (f.value for f in DocumentFormat))
    cursor = single.get("cursor")
    return DocumentSearch(
        text=single.get("q"),
        states=frozenset(DocumentState(s) for s in states),
        scope=single.get("scope"),
        formats=frozenset(DocumentFormat(f) for f in formats),
        uploaded_since=_time("since", single.get("since")),
        uploaded_until=_time("until", single.get("until")),
        uploader=single.get("uploader"),
        limit=_limit(single.get("limit")),
        cursor=DocumentCursor.decode(cursor) if cursor is not None else None,
    )
