"""The JSON Schemas of the two tool kinds, and the parsing of a call's arguments against them.

Every search tool (``esra_{slug}``) shares one input and one output schema, and so does every
fetch tool (``esra_{slug}_fetch``): what differs between exposures is what they search, not
the shape of a call. Arguments are parsed here rather than trusted to the client: an unknown
argument, a wrong type or a value out of range is ``ESRA_INVALID_REQUEST``, and the message
names the argument, never its value.

Caller-supplied filters are not part of the search schema yet: the core's ``Retriever`` takes
no caller filters, and a filter the validator never saw must not reach a provider.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs

from esra.core.exceptions import InvalidRequestError
from esra.core.fetch.service import DEFAULT_FETCH_CHARS
from esra.core.retriever import MAX_REQUEST_CHARS

__all__ = [
    "FETCH_INPUT_SCHEMA",
    "FETCH_OUTPUT_SCHEMA",
    "MAX_DOCUMENT_REF_CHARS",
    "MAX_FETCH_CHARS",
    "MAX_TOP_K",
    "SEARCH_INPUT_SCHEMA",
    "SEARCH_OUTPUT_SCHEMA",
    "FetchArguments",
    "SearchArguments",
    "parse_fetch_arguments",
    "parse_search_arguments",
]

MAX_TOP_K = 100
MAX_FETCH_CHARS = 100_000
MAX_DOCUMENT_REF_CHARS = 8_192

_STRING: Final = {"type": "string"}
_STRINGS: Final = {"type": "array", "items": _STRING}
_FIELDS: Final = {
    "type": "object",
    "additionalProperties": _STRING,
    "description": "Allowlisted (and, where configured, masked) fields of the record.",
}

SEARCH_INPUT_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "prompt": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_REQUEST_CHARS,
            "description": "What to look for, in natural language.",
        },
        "topK": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_TOP_K,
            "description": "Return at most this many results; the tool's own limit still applies.",
        },
    },
    "required": ["prompt"],
    "additionalProperties": False,
}

_RESULT: Final = {
    "type": "object",
    "properties": {
        "title": _STRING,
        "fragments": {**_STRINGS, "description": "Passages of the record that matched."},
        "fields": _FIELDS,
        "source": {**_STRING, "description": "The business name of the record's source."},
        "provenance": {
            "type": "object",
            "properties": {
                "resultId": {
                    **_STRING,
                    "description": "Opaque id, valid in this response only; answer citations "
                    "name it.",
                },
                "rank": {"type": "integer", "minimum": 1},
                "score": {"type": "number"},
            },
            "required": ["resultId", "rank", "score"],
            "additionalProperties": False,
        },
        "documentRef": {
            "type": ["string", "null"],
            "description": "Pass to the matching _fetch tool to read more of the record; null "
            "when the tool offers no fetch.",
        },
    },
    "required": ["title", "fragments", "fields", "source", "provenance", "documentRef"],
    "additionalProperties": False,
}

SEARCH_OUTPUT_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "status": {"type": "string", "enum": ["complete", "degraded"]},
        "results": {"type": "array", "items": _RESULT},
        "warnings": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"code": _STRING, "message": _STRING},
                "required": ["code", "message"],
                "additionalProperties": False,
            },
            "description": "Why a degraded response is partial; codes are ESRA_* warnings.",
        },
        "answer": {
            "type": "object",
            "properties": {"text": _STRING, "citations": _STRINGS},
            "required": ["text", "citations"],
            "additionalProperties": False,
            "description": "A short answer citing results by resultId, where allowed.",
        },
        "correlationId": _STRING,
    },
    "required": ["status", "results", "warnings", "correlationId"],
    "additionalProperties": False,
}

FETCH_INPUT_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "documentRef": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_DOCUMENT_REF_CHARS,
            "description": "A result's documentRef from the matching search tool.",
        },
        "offset": {
            "type": "integer",
            "minimum": 0,
            "default": 0,
            "description": "Where to start, in characters (a previous page's nextOffset).",
        },
        "maxChars": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_FETCH_CHARS,
            "default": DEFAULT_FETCH_CHARS,
            "description": "At most this many characters; the tool's size cap still applies.",
        },
    },
    "required": ["documentRef"],
    "additionalProperties": False,
}

_OPTIONAL_INT: Final = {"type": ["integer", "null"]}

FETCH_OUTPUT_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "source": _STRING,
        "title": _STRING,
        "text": _STRING,
        "offset": {"type": "integer", "minimum": 0},
        "totalChars": {**_OPTIONAL_INT, "description": "null when the length is not known."},
        "hasMore": {"type": "boolean"},
        "nextOffset": {**_OPTIONAL_INT, "description": "Pass as offset for the next page."},
        "fields": _FIELDS,
        "correlationId": _STRING,
    },
    "required": [
        "source",
        "title",
        "text",
        "offset",
        "totalChars",
        "hasMore",
        "nextOffset",
        "fields",
        "correlationId",
    ],
    "additionalProperties": False,
}


@attrs.frozen
class SearchArguments:
    """A search call's arguments, parsed."""

    prompt: str
    top_k: int | None = None


@attrs.frozen
class FetchArguments:
    """A fetch call's arguments, parsed."""

    document_ref: str = attrs.field(repr=False)
    offset: int = 0
    max_chars: int = DEFAULT_FETCH_CHARS


def _invalid(message: str) -> InvalidRequestError:
    return InvalidRequestError(message)


def _only(arguments: object, schema: Mapping[str, Any]) -> Mapping[str, Any]:
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        raise _invalid("The arguments must be an object.")
    known = schema["properties"].keys()
    if any(name not in known for name in arguments):
        # Argument names are the client's text: name the accepted ones instead.
        raise _invalid(f"Unknown argument; accepted: {', '.join(sorted(known))}.")
    for name in schema["required"]:
        if name not in arguments:
            raise _invalid(f"The argument {name} is required.")
    return arguments


def _integer(arguments: Mapping[str, Any], name: str, low: int, high: int | None) -> int | None:
    value = arguments.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid(f"The argument {name} must be an integer.")
    if value < low or (high is not None and value > high):
        upper = f" and at most {high}" if high is not None else ""
        raise _invalid(f"The argument {name} must be at least {low}{upper}.")
    return value


def _string(arguments: Mapping[str, Any], name: str, max_chars: int) -> str:
    value = arguments.get(name)
    if not isinstance(value, str) or not value.strip() or len(value) > max_chars:
        raise _invalid(f"The argument {name} must be a string of 1 to {max_chars} characters.")
    return value


def parse_search_arguments(arguments: object) -> SearchArguments:
    """Parse a search call's arguments.

    Raises:
        InvalidRequestError: an argument is unknown, missing, of the wrong type or out of range.
    """
    given = _only(arguments, SEARCH_INPUT_SCHEMA)
    return SearchArguments(
        prompt=_string(given, "prompt", MAX_REQUEST_CHARS),
        top_k=_integer(given, "topK", 1, MAX_TOP_K),
    )


def parse_fetch_arguments(arguments: object) -> FetchArguments:
    """Parse a fetch call's arguments.

    Raises:
        InvalidRequestError: an argument is unknown, missing, of the wrong type or out of range.
    """
    given = _only(arguments, FETCH_INPUT_SCHEMA)
    offset = _integer(given, "offset", 0, None)
    max_chars = _integer(given, "maxChars", 1, MAX_FETCH_CHARS)
    return FetchArguments(
        document_ref=_string(given, "documentRef", MAX_DOCUMENT_REF_CHARS),
        offset=0 if offset is None else offset,
        max_chars=DEFAULT_FETCH_CHARS if max_chars is None else max_chars,
    )
