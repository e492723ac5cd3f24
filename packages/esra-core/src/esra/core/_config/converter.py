"""The one cattrs converter for configuration import and export."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any, TypeVar, get_origin

import attrs
import cattrs
from cattrs.gen import make_dict_unstructure_fn, override
from cattrs.preconf.json import make_converter

from esra.core._config.access_policy import AccessPolicy
from esra.core._config.ceilings import LimitCeilings
from esra.core._config.exposure import Exposure
from esra.core._config.snapshot import ConfigSnapshot
from esra.core.exceptions import ConfigurationError

__all__ = ["CONVERTER", "dump_snapshot", "load_part", "load_snapshot"]

_T = TypeVar("_T")

CONVERTER = make_converter(forbid_extra_keys=True)


# cattrs structures a primitive by calling its type: ``bool("false")`` is True, ``str({})`` is
# "{}", ``int(2.5)`` is 2. In configuration that fails open — ``"is_returnable": "false"``
# made a field returnable, ``"fetch_enabled": "false"`` published a fetch tool — so every
# primitive accepts only its own JSON type (a hostile review's finding). The hooks are
# dispatched for subclasses too (a ``StrEnum`` is a ``str``): those still structure as
# their members, from a value of the base's JSON type.
def _strict(
    base: type, name: str, accepts: Callable[[object], bool]
) -> Callable[[object, type], Any]:
    def structure(value: object, kind: type) -> Any:
        if not accepts(value):
            msg = f"expected {name}, not {type(value).__name__}"
            raise TypeError(msg)
        return value if kind is base else kind(value)

    return structure


def _is_integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_finite_number(value: object) -> bool:
    return (_is_integer(value) or isinstance(value, float)) and math.isfinite(value)  # type: ignore[arg-type]


def _number(value: object, kind: type) -> float:
    if not _is_finite_number(value):
        msg = f"expected a finite number, not {type(value).__name__}"
        raise TypeError(msg)
    return float(value) if kind is float else kind(value)  # type: ignore[arg-type]


CONVERTER.register_structure_hook(
    bool, _strict(bool, "true or false", lambda v: isinstance(v, bool))
)
CONVERTER.register_structure_hook(int, _strict(int, "an integer", _is_integer))
CONVERTER.register_structure_hook(float, _number)


_string = _strict(str, "a string", lambda v: isinstance(v, str))


def _text(value: object, kind: type) -> Any:
    # A lone surrogate ("\ud800" in JSON) is no text UTF-8 can encode: kept, it fails the
    # state database's save unclassified (SQLite and PostgreSQL alike) and every prompt,
    # audit record and log line it reaches. Refused here, where every document is read.
    # NUL likewise: PostgreSQL text and jsonb cannot hold it, so a description or an id
    # carrying one failed the state database's save unclassified (and unaudited).
    if isinstance(value, str) and "\x00" in value:
        msg = "expected text without NUL (U+0000)"
        raise ValueError(msg)
    if isinstance(value, str) and not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            msg = "expected Unicode text, not a lone surrogate"
            raise ValueError(msg) from None
    return _string(value, kind)


CONVERTER.register_structure_hook(str, _text)

# A string where a list belongs would be structured as the set (or tuple) of its characters:
# ``"audience": "app-1"`` an audience of ``a``, ``p``, ``-``, ``1``. Collections accept only
# JSON arrays, then structure as cattrs does (these are its own set and tuple hooks, kept so
# errors keep their paths).
_COLLECTION_HOOKS: dict[object, Callable[[Any, Any], Any]] = {
    frozenset: CONVERTER._structure_frozenset,
    tuple: CONVERTER._structure_tuple,
}


def _is_guarded_collection(kind: object) -> bool:
    return get_origin(kind) in _COLLECTION_HOOKS


def _arrays_only(kind: object) -> Callable[[object, object], Any]:
    structure_items = _COLLECTION_HOOKS[get_origin(kind)]

    def structure(value: object, _kind: object) -> Any:
        if not isinstance(value, list | tuple | frozenset | set):
            msg = f"expected a list, not {type(value).__name__}"
            raise TypeError(msg)
        return structure_items(value, kind)

    return structure


CONVERTER.register_structure_hook_factory(_is_guarded_collection, _arrays_only)


def _is_frozenset(kind: object) -> bool:
    return (get_origin(kind) or kind) is frozenset


def _sorted_set_dumper(_kind: object) -> Callable[[frozenset[Any]], list[Any]]:
    # Sets are written sorted, so the same configuration always dumps to the same document
    # (a stored or exported configuration diffs cleanly in review).
    def dump(value: frozenset[Any]) -> list[Any]:
        return sorted((CONVERTER.unstructure(item) for item in value), key=str)

    return dump


CONVERTER.register_unstructure_hook_factory(_is_frozenset, _sorted_set_dumper)

# The narrowing levels are written only where set, so a configuration that narrows nothing
# dumps exactly as before they existed (stored and exported documents do not change), and
# one that does shows only the ceilings it sets.
CONVERTER.register_unstructure_hook(
    LimitCeilings, make_dict_unstructure_fn(LimitCeilings, CONVERTER, _cattrs_omit_if_default=True)
)
for _narrowed in (Exposure, AccessPolicy):
    CONVERTER.register_unstructure_hook(
        _narrowed,
        make_dict_unstructure_fn(
            _narrowed,
            CONVERTER,
            response_modes=override(omit_if_default=True),
            limits=override(omit_if_default=True),
        ),
    )


def load_snapshot(data: dict[str, Any]) -> ConfigSnapshot:
    """Structure a configuration document (JSON-compatible) into a checked snapshot.

    Raises:
        ConfigurationError: the document does not describe a valid, consistent snapshot.
    """
    return load_part(data, ConfigSnapshot, what="configuration document")


def load_part(data: object, kind: type[_T], *, what: str) -> _T:
    """Structure one configuration object (a ``Source``, ``Mapping``, ``Capability``, …).

    Every problem is reported with its path in the document (``$.limits.max_results``).

    Raises:
        ConfigurationError: ``data`` does not describe a valid ``kind``; the message starts
            with ``what``.
    """
    if attrs.has(kind) and not isinstance(data, dict):
        # cattrs would fail reading a list or a string as an object with an AttributeError.
        msg = f"{what} is not valid: expected a JSON object, not {type(data).__name__}"
        raise ConfigurationError(msg)
    try:
        return CONVERTER.structure(data, kind)
    except ConfigurationError:
        raise
    except (cattrs.BaseValidationError, ValueError, TypeError) as exc:
        details = (
            cattrs.transform_error(exc, format_exception=_described)
            if isinstance(exc, cattrs.BaseValidationError)
            else [str(exc)]
        )
        msg = f"{what} is not valid: " + "; ".join(details)
        raise ConfigurationError(msg) from exc


# An attrs bound validator's message names the field and its bound, then the value given
# (``'size_cap_chars' must be >= 1: 0``). The rule is what the author needs; the value is
# theirs already and may be long, so it is left out.
_BOUND_BROKEN = re.compile(r"('[a-z_]+' must be (?:[<>=]{1,2} -?[0-9.]+|in range\(-?\d+, -?\d+\)))")


def _described(exc: BaseException, kind: type | None) -> str:
    """cattrs' description of one problem, with the rule an attrs bound validator broke."""
    message = exc.args[0] if exc.args and isinstance(exc.args[0], str) else ""
    if isinstance(exc, ValueError) and (broken := _BOUND_BROKEN.match(message)):
        return broken.group(1)
    return cattrs.v.format_exception(exc, kind)


def dump_snapshot(snapshot: ConfigSnapshot) -> dict[str, Any]:
    """Unstructure a snapshot into a JSON-compatible document that ``load_snapshot`` reads back."""
    data: dict[str, Any] = CONVERTER.unstructure(snapshot)
    return data
