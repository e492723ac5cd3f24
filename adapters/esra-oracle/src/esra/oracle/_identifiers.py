"""The Oracle dialect ESRA compiles with: a configured name is one identifier, or refused.

No Oracle identifier, quoted or not, may hold a double quote or a NUL (DIA-25716): a ``"``
only ever delimits an identifier, and Oracle has no escape for one inside it. SQLAlchemy's
``oracle`` quoter doubles it as standard SQL would, so a mapping naming ``hr" "x`` reached
Oracle as ``"hr"" ""x"``, which Oracle reads as the three identifiers ``"hr" " " "x"`` — a
statement other than the one the mapping describes. This dialect's quoter refuses such a
name instead; every other character stays inside one delimited identifier, as before.
"""

from __future__ import annotations

from sqlalchemy.dialects.oracle.base import OracleIdentifierPreparer
from sqlalchemy.dialects.oracle.oracledb import OracleDialect_oracledb
from sqlalchemy.engine import Dialect

from esra.core.codes import ProviderErrorCode
from esra.core.exceptions import ProviderError
from esra.core.providers import unencodable_identifier_problem

__all__ = [
    "MAX_IDENTIFIER_BYTES",
    "is_oracle_identifier",
    "oracle_dialect",
    "oracle_identifier_problem",
]

# Oracle's longest name since 12.2 (COMPATIBLE 12.2 or later); 30 bytes before.
MAX_IDENTIFIER_BYTES = 128


def is_oracle_identifier(name: str) -> bool:
    """Whether an Oracle identifier can hold ``name``: it has no ``"`` and no NUL."""
    return '"' not in name and "\x00" not in name


def oracle_identifier_problem(name: str) -> str | None:
    """Why no Oracle identifier can hold ``name`` (without repeating it), or ``None``.

    What esra-oracle's provider factory states, so publication refuses such a mapping
    instead of every search of it failing: a ``"`` or a NUL (the dialect's quoter refuses
    them too), an empty name, or one over 128 bytes in UTF-8 — after a name the statement's
    text cannot encode (whose UTF-8 length has no meaning).
    """
    unencodable = unencodable_identifier_problem(name)
    if unencodable is not None:
        return unencodable
    if not is_oracle_identifier(name):
        return "it holds a double quote or NUL, which no Oracle identifier can"
    if not name:
        return "it is empty"
    if len(name.encode()) > MAX_IDENTIFIER_BYTES:
        return f"it is longer than Oracle's {MAX_IDENTIFIER_BYTES} bytes"
    return None


class _OracleIdentifiers(OracleIdentifierPreparer):
    """SQLAlchemy's Oracle quoter, refusing the names Oracle cannot have."""

    def quote_identifier(self, value: str) -> str:
        """Return ``value`` as one delimited identifier.

        Raises:
            ProviderError: ``RELATION_NOT_FOUND`` — what Oracle answers for an invalid
                identifier (ORA-00904) — when ``value`` holds ``"`` or NUL. The name stays
                out of the error: it is configuration, not the caller's to see.
        """
        if not is_oracle_identifier(value):
            error = ProviderError(ProviderErrorCode.RELATION_NOT_FOUND)
            error.add_note("a configured name holds a double quote or NUL; Oracle has none")
            raise error
        return super().quote_identifier(value)


class _OracleDialect(OracleDialect_oracledb):
    """python-oracledb's dialect with the refusing quoter; it only ever compiles."""

    preparer = _OracleIdentifiers
    supports_statement_cache = True


def oracle_dialect() -> Dialect:
    """The ``oracle`` dialect with ``named`` binds (python-oracledb's ``:name`` style), whose
    quoter refuses a name Oracle cannot have (``is_oracle_identifier``)."""
    return _OracleDialect(paramstyle="named")  # type: ignore[no-untyped-call]
