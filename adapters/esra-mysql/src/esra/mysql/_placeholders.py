"""The builder's command text as MySQL prepares it: ``?`` where a value goes, nothing else.

A search is sent as a server-side prepared statement (``esra.mysql._prepared``), so the text
the server parses must name no value at all: each ``%(name)s`` of the builder's ``pyformat``
text becomes ``?`` and the value travels, in that order, in the execute packet. The
``pyformat`` grammar is exact because the dialect doubles every ``%`` in an identifier: a
``%%`` is one literal ``%`` (inside a quoted identifier), a ``%(name)s`` is a placeholder,
and any other ``%`` means the text was not the builder's. ``?`` inside a quoted identifier
stays what it is: the server's parser sees placeholders only outside quotes.

The text depends on the query's shape alone, so the conversion is cached by text.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping

import attrs

__all__ = ["PreparedText", "prepared_text"]

_TOKEN = re.compile(r"%\((\w+)\)s|%%|%")


@attrs.frozen
class PreparedText:
    """Command text with ``?`` placeholders, and the bind name each stands for, in order."""

    sql: str
    names: tuple[str, ...]

    def values(self, params: Mapping[str, object]) -> tuple[object, ...]:
        """The execution's values in placeholder order.

        Raises:
            KeyError: a placeholder has no value.
        """
        return tuple(params[name] for name in self.names)


@functools.lru_cache(maxsize=512)
def prepared_text(pyformat_sql: str) -> PreparedText:
    """Return ``pyformat_sql`` with ``%(name)s`` as ``?`` and ``%%`` as ``%``.

    Raises:
        ValueError: a ``%`` that is neither (the text is not a compiled ``pyformat``
            statement).
    """
    names: list[str] = []

    def replace(token: re.Match[str]) -> str:
        if token.group(1) is not None:
            names.append(token.group(1))
            return "?"
        if token.group(0) == "%%":
            return "%"
        msg = "a lone % in pyformat command text"
        raise ValueError(msg)

    sql = _TOKEN.sub(replace, pyformat_sql)
    return PreparedText(sql, tuple(names))
