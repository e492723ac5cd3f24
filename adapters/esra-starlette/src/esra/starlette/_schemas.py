"""The JSON Schemas of the two tool kinds, and the parsing of a call's arguments against them.

Every search tool (``esra_{slug}``) shares one output schema, and every fetch tool
(``esra_{slug}_fetch``) one input and one output schema. A search tool's input schema differs
only in ``filters``: it lists, per field, exactly the fields this caller may filter on through
this exposure, with their operators and value types (``search_input_schema``). Arguments are
parsed here rather than trusted to the client: an unknown argument, a wrong type, a value
out of range or text that is not Unicode (a lone surrogate) is ``ESRA_INVALID_REQUEST``, and
the message names the argument, never its value.

The schemas use one dialect every model client reads: JSON Schema 2020-12 without an
array-valued ``type`` (a nullable value or a union is ``anyOf``) and without ``const`` (a
single-value ``enum`` instead).

``filters`` are shape-checked here (field name, operator, scalar or list value) and handed
to the core as ``PlannedFilter`` objects; which fields, operators and value types the caller
may use is the core's decision (``esra.core._pipeline.caller_filters``), and the validator
then checks each filter exactly as the planner's own.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, Final

import attrs

from esra.core.config import FieldType, Operator
from esra.core.exceptions import InvalidRequestError
from esra.core.fetch import DEFAULT_FETCH_CHARS
from esra.core.hosting import MAX_CALLER_FILTERS, MAX_REQUEST_CHARS, CallerFilterField
from esra.core.providers import FilterValue, PlannedFilter, Scalar

__all__ = [
    "FETCH_INPUT_SCHEMA",
    "FETCH_OUTPUT_SCHEMA",
    "MAX_DOCUMENT_REF_CHARS",
    "MAX_FETCH_CHARS",
    "MAX_FILTER_FIELD_CHARS",
    "MAX_FILTER_VALUES",
    "MAX_FILTER_VALUE_CHARS",
    "MAX_TOP_K",
    "SEARCH_OUTPUT_SCHEMA",
    "FetchArguments",
    "SearchArguments",
    "parse_fetch_arguments",
    "parse_search_arguments",
    "search_input_schema",
]

MAX_TOP_K = 100
MAX_FETCH_CHARS = 100_000
MAX_DOCUMENT_REF_CHARS = 8_192

# Field names are business names: short identifiers, never free text.
MAX_FILTER_FIELD_CHARS = 64
MAX_FILTER_VALUE_CHARS = 256
MAX_FILTER_VALUES = 50

_STRING: Final = {"type": "string"}
_NULL: Final = {"type": "null"}
_STRINGS: Final = {"type": "array", "items": _STRING}
_FIELDS: Final = {
    "type": "object",
    "additionalProperties": _STRING,
    "description": "Allowlisted (and, where configured, masked) fields of the record.",
}

_PROMPT: Final = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_REQUEST_CHARS,
    "description": "What to look for, in natural language.",
}
_TOP_K: Final = {
    "type": "integer",
    "minimum": 1,
    "maximum": MAX_TOP_K,
    "description": "Return at most this many results; the tool's own limit still applies.",
}
# The arguments a search call may pass, whatever fields the caller may filter on.
_SEARCH_ARGUMENTS: Final = ("prompt", "topK", "filters")
_SEARCH_REQUIRED: Final = ("prompt",)

# One JSON Schema per field type; never an array-valued "type", which several model clients
# read poorly (optionality and unions are anyOf).
_VALUE_SCHEMAS: Final[dict[FieldType, dict[str, Any]]] = {
    FieldType.TEXT: {"type": "string", "maxLength": MAX_FILTER_VALUE_CHARS},
    FieldType.DATE: {"type": "string", "format": "date"},
    FieldType.INTEGER: {"type": "integer"},
    FieldType.NUMBER: {"type": "number"},
    FieldType.BOOLEAN: {"type": "boolean"},
}


def _one_of_types(field: CallerFilterField) -> dict[str, Any]:
    schemas = [_VALUE_SCHEMAS[t] for t in field.types]
    return dict(schemas[0]) if len(schemas) == 1 else {"anyOf": schemas}


def _field_filter_schema(field: CallerFilterField) -> dict[str, Any]:
    """The filter object for one field: its name, its operators, values of its type."""
    scalar = _one_of_types(field)
    value: dict[str, Any] = scalar
    if Operator.IN in field.operators:
        listed = {"type": "array", "items": scalar, "minItems": 1, "maxItems": MAX_FILTER_VALUES}
        value = {"anyOf": [scalar, listed]}
        value["description"] = "One value, or a list of values for the in operator."
    operators = [op.value for op in field.operators]
    about = f"{field.description} — " if field.description else ""
    return {
        "type": "object",
        "description": f"{about}operators: {', '.join(operators)}.",
        "properties": {
            "field": {"type": "string", "enum": [field.name]},
            "operator": {"type": "string", "enum": operators},
            "value": value,
        },
        "required": ["field", "operator", "value"],
        "additionalProperties": False,
    }


def search_input_schema(fields: Sequence[CallerFilterField]) -> dict[str, Any]:
    """The input schema of a search tool, listing exactly the fields its caller may filter on.

    ``fields`` come from ``esra.core.hosting.listed_filter_fields`` for this
    caller and exposure: a field outside them — restricted, hidden, of a source the caller
    cannot search, or unknown — is never named, and a call naming one is refused with the
    message that names these.
    """
    if fields:
        names = ", ".join(f.name for f in fields)
        filters: dict[str, Any] = {
            "type": "array",
            "maxItems": MAX_CALLER_FILTERS,
            "description": "Conditions every result must meet, on these business fields: "
            f"{names}. A source that cannot apply them all is not searched.",
            "items": {"anyOf": [_field_filter_schema(f) for f in fields]},
        }
    else:
        filters = {
            "type": "array",
            "maxItems": 0,
            "description": "This tool takes no filters.",
        }
    return {
        "type": "object",
        "properties": {"prompt": _PROMPT, "topK": _TOP_K, "filters": filters},
        "required": list(_SEARCH_REQUIRED),
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
            "anyOf": [_STRING, _NULL],
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

_OPTIONAL_INT: Final = {"anyOf": [{"type": "integer"}, _NULL]}

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
    filters: tuple[PlannedFilter, ...] = ()


@attrs.frozen
class FetchArguments:
    """A fetch call's arguments, parsed."""

    document_ref: str = attrs.field(repr=False)
    offset: int = 0
    max_chars: int = DEFAULT_FETCH_CHARS


def _invalid(message: str) -> InvalidRequestError:
    return InvalidRequestError(message)


def _only(arguments: object, known: Collection[str], required: Iterable[str]) -> Mapping[str, Any]:
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        raise _invalid("The arguments must be an object.")
    if any(name not in known for name in arguments):
        # Argument names are the client's text: name the accepted ones instead.
        raise _invalid(f"Unknown argument; accepted: {', '.join(sorted(known))}.")
    for name in required:
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


def _unicode(value: str) -> bool:
    """Whether ``value`` is Unicode text: no lone surrogate, which UTF-8 cannot carry.

    JSON's ``\\uD800`` escapes let a client send one, and the MCP SDK's 2026-07-28 entry parses
    bodies with ``json.loads``, which keeps it; past this point it would fail wherever the
    text is encoded (a cache key, a driver, an audit store) as an unclassified error.
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _string(arguments: Mapping[str, Any], name: str, max_chars: int) -> str:
    value = arguments.get(name)
    if not isinstance(value, str) or not value.strip() or len(value) > max_chars:
        raise _invalid(f"The argument {name} must be a string of 1 to {max_chars} characters.")
    if not _unicode(value):
        raise _invalid(f"The argument {name} is not Unicode text (it holds a lone surrogate).")
    return value


def _scalar(value: object) -> Scalar:
    if isinstance(value, str) and len(value) <= MAX_FILTER_VALUE_CHARS:
        if not _unicode(value):
            raise _invalid("A filter's value is not Unicode text (it holds a lone surrogate).")
        return value
    if isinstance(value, bool | int | float):
        return value
    msg = (
        "Each filter value must be a string of at most "
        f"{MAX_FILTER_VALUE_CHARS} characters, a number or a boolean."
    )
    raise _invalid(msg)


def _filters(arguments: Mapping[str, Any]) -> tuple[PlannedFilter, ...]:
    given = arguments.get("filters")
    if given is None:
        return ()
    if not isinstance(given, list) or len(given) > MAX_CALLER_FILTERS:
        raise _invalid(f"The argument filters must be a list of at most {MAX_CALLER_FILTERS}.")
    operators = {op.value for op in Operator}
    parsed = []
    for item in given:
        if not isinstance(item, Mapping) or set(item) != {"field", "operator", "value"}:
            raise _invalid("Each filter must be an object with field, operator and value.")
        field, operator, raw = item["field"], item["operator"], item["value"]
        if not isinstance(field, str) or not 0 < len(field) <= MAX_FILTER_FIELD_CHARS:
            raise _invalid(
                f"A filter's field must be a name of 1 to {MAX_FILTER_FIELD_CHARS} characters."
            )
        if not _unicode(field):
            raise _invalid("A filter's field is not Unicode text (it holds a lone surrogate).")
        if operator not in operators:
            raise _invalid(f"A filter's operator must be one of {', '.join(sorted(operators))}.")
        value: FilterValue
        if isinstance(raw, list):
            if not 0 < len(raw) <= MAX_FILTER_VALUES:
                raise _invalid(f"A filter's list holds 1 to {MAX_FILTER_VALUES} values.")
            value = tuple(_scalar(v) for v in raw)
        else:
            value = _scalar(raw)
        parsed.append(PlannedFilter(field=field, operator=operator, value=value))
    return tuple(parsed)


def parse_search_arguments(arguments: object) -> SearchArguments:
    """Parse a search call's arguments.

    Which fields, operators and value types ``filters`` may use for this caller is the
    core's decision (``esra.core._pipeline.caller_filters.check_caller_filters``).

    Raises:
        InvalidRequestError: an argument is unknown, missing, of the wrong type or out of range.
    """
    given = _only(arguments, _SEARCH_ARGUMENTS, _SEARCH_REQUIRED)
    return SearchArguments(
        prompt=_string(given, "prompt", MAX_REQUEST_CHARS),
        top_k=_integer(given, "topK", 1, MAX_TOP_K),
        filters=_filters(given),
    )


def parse_fetch_arguments(arguments: object) -> FetchArguments:
    """Parse a fetch call's arguments.

    Raises:
        InvalidRequestError: an argument is unknown, missing, of the wrong type or out of range.
    """
    given = _only(arguments, FETCH_INPUT_SCHEMA["properties"], FETCH_INPUT_SCHEMA["required"])
    offset = _integer(given, "offset", 0, None)
    max_chars = _integer(given, "maxChars", 1, MAX_FETCH_CHARS)
    return FetchArguments(
        document_ref=_string(given, "documentRef", MAX_DOCUMENT_REF_CHARS),
        offset=0 if offset is None else offset,
        max_chars=DEFAULT_FETCH_CHARS if max_chars is None else max_chars,
    )
