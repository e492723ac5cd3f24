"""The values of one execution as RPC parameters: DATE fields' values declared ``date``.

The validator gives a DATE field's value as ISO text (``2024-01-05``). Declared ``nvarchar``
and compared with a ``datetime`` or ``smalldatetime`` column, that text was converted to the
column's type under the session's ``DATEFORMAT``, which the login's language sets: under
``dmy`` (British English, German, French...) ``yyyy-mm-dd`` reads as ``yyyy-dd-mm``, so a
filter or record-level predicate on ``2024-01-05`` compared with 1 May, silently, and
``2024-01-13`` failed the statement (error 242). Declared ``date`` (``esra.sqlserver._rpc``
does so for a ``datetime.date``), the same text converts to ``date`` whatever the
``DATEFORMAT``, and ``date`` then widens to the column's type exactly.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from datetime import date

from esra.core.config import FieldType
from esra.core.providers import ResolvedFilter, ValidatedQuery, predicate_values
from esra.sql import BuiltStatement, filter_bind_name, predicate_bind_name
from esra.sqlserver._rpc import bindable

__all__ = ["rpc_values"]


def rpc_values(built: BuiltStatement, query: ValidatedQuery) -> dict[str, object]:
    """``built``'s parameters made bindable, DATE fields' values as ``datetime.date``."""
    params = {name: bindable(value) for name, value in built.params.items()}
    for prefix, filters in (("f", query.filters), ("r", query.record_filters)):
        _dates(params, prefix, filters)
    if query.record_predicate is not None:
        for i, (field_type, value) in enumerate(predicate_values(query.record_predicate)):
            if field_type is FieldType.DATE:
                _as_date(params, predicate_bind_name(i), value)
    return params


def _dates(params: dict[str, object], prefix: str, filters: Sequence[ResolvedFilter]) -> None:
    for i, flt in enumerate(filters):
        if flt.type is FieldType.DATE:
            for j, value in enumerate(flt.values):
                _as_date(params, filter_bind_name(prefix, i, j), value)


def _as_date(params: dict[str, object], name: str, value: object) -> None:
    # Only a name the statement binds: a lookup (document fetch) carries no filters of its
    # own, and text that is no ISO date stays text (the validator never issues one).
    if name in params and isinstance(value, str):
        with contextlib.suppress(ValueError):
            params[name] = date.fromisoformat(value)
