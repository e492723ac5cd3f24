"""The one cattrs converter for configuration import and export."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, get_origin

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
    try:
        return CONVERTER.structure(data, kind)
    except ConfigurationError:
        raise
    except (cattrs.BaseValidationError, ValueError, TypeError) as exc:
        details = (
            cattrs.transform_error(exc)
            if isinstance(exc, cattrs.BaseValidationError)
            else [str(exc)]
        )
        msg = f"{what} is not valid: " + "; ".join(details)
        raise ConfigurationError(msg) from exc


def dump_snapshot(snapshot: ConfigSnapshot) -> dict[str, Any]:
    """Unstructure a snapshot into a JSON-compatible document that ``load_snapshot`` reads back."""
    data: dict[str, Any] = CONVERTER.unstructure(snapshot)
    return data
