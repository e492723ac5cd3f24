"""The one cattrs converter for configuration import and export."""

from __future__ import annotations

from typing import Any, TypeVar

import cattrs
from cattrs.preconf.json import make_converter

from esra.core.config.snapshot import ConfigSnapshot
from esra.core.exceptions import ConfigurationError

__all__ = ["CONVERTER", "dump_snapshot", "load_part", "load_snapshot"]

_T = TypeVar("_T")

CONVERTER = make_converter(forbid_extra_keys=True)


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
