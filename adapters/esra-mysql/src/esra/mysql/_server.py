"""Which server the provider talks to — MariaDB or MySQL — and how each bounds a statement.

The flavour is read from ``VERSION()`` (MariaDB's contains ``MariaDB``), in the statement
that reads the full-text token rules at first connect. It decides the server-side statement
timeout:

- MariaDB 10.1+: ``SET STATEMENT max_statement_time=<seconds> FOR SELECT ...`` — the limit
  applies to that one statement only; exceeding it raises error 1969.
- MySQL 5.7.8+/8: the optimizer hint ``SELECT /*+ MAX_EXECUTION_TIME(<ms>) */ ...`` — read-only
  SELECTs only; exceeding it raises error 3024.

The number is computed here from the caller's float timeout (never from query content) and
formatted as a plain decimal, so it cannot carry anything but digits and a point. It is part
of the prepared text: neither form accepts a ``?`` there (MariaDB answers 1232). So that the
text recurs and its prepared form can be reused (``esra.mysql._statement_cache``), a search's
limit is its remaining budget rounded down to two significant digits of milliseconds
(``reusable_limit_s``): at most a tenth less time on the server, never more, while the
budgets of calls that start alike give the same text.
"""

from __future__ import annotations

import logging
import math
from enum import StrEnum

import attrs
from mysql.connector.connection import MySQLConnection

from esra.mysql._fulltext import DEFAULT_STOPWORDS, TokenRules, stopwords_from
from esra.mysql._prepared import fetch_all
from esra.mysql._quote import quote_identifier

__all__ = ["ServerFlavor", "ServerInfo", "detect_server", "reusable_limit_s", "with_timeout"]

_log = logging.getLogger("esra.mysql")

_MIN_TIMEOUT_S = 0.001
_SELECT = "SELECT "


class ServerFlavor(StrEnum):
    """The server family: they differ in how a statement's time limit is expressed."""

    MARIADB = "mariadb"
    MYSQL = "mysql"


@attrs.frozen
class ServerInfo:
    """What the provider learned at first connect."""

    flavor: ServerFlavor
    version: str
    rules: TokenRules


def flavor_of(version: str) -> ServerFlavor:
    """Return the flavour a version string names (``10.11.6-MariaDB-...``)."""
    return ServerFlavor.MARIADB if "mariadb" in version.lower() else ServerFlavor.MYSQL


def reusable_limit_s(timeout_s: float) -> float:
    """Return ``timeout_s`` rounded down to two significant digits of whole milliseconds
    (4.987 s gives 4.9 s, 0.0734 s gives 0.073 s), and at least a millisecond.

    Raises:
        ValueError: the timeout is not a finite number.
    """
    if not math.isfinite(timeout_s):
        msg = "the timeout must be finite"
        raise ValueError(msg)
    digits = str(max(1, math.floor(timeout_s * 1000)))
    return int(digits[:2].ljust(len(digits), "0")) / 1000


def with_timeout(sql: str, flavor: ServerFlavor, timeout_s: float) -> str:
    """Return ``sql`` (a ``SELECT``) bounded server-side to ``timeout_s`` seconds.

    Raises:
        ValueError: if ``sql`` is not a SELECT or the timeout is not a finite number.
    """
    if not sql.startswith(_SELECT):
        msg = "only a SELECT can be bounded"
        raise ValueError(msg)
    if not math.isfinite(timeout_s):
        msg = "the timeout must be finite"
        raise ValueError(msg)
    seconds = max(timeout_s, _MIN_TIMEOUT_S)
    if flavor is ServerFlavor.MARIADB:
        # max_statement_time=0 would mean "no limit": the floor keeps it a limit.
        return f"SET STATEMENT max_statement_time={seconds:.3f} FOR {sql}"
    milliseconds = max(1, math.ceil(seconds * 1000))
    return f"SELECT /*+ MAX_EXECUTION_TIME({milliseconds}) */ {sql[len(_SELECT) :]}"


def detect_server(connection: MySQLConnection) -> ServerInfo:
    """Read the version and the InnoDB full-text token rules over an open connection.

    The token sizes come from ``@@innodb_ft_min_token_size`` / ``@@innodb_ft_max_token_size``;
    the stopwords from the configured stopword table if one is set, else InnoDB's default
    list (``INFORMATION_SCHEMA.INNODB_FT_DEFAULT_STOPWORD``, which needs the PROCESS
    privilege — a reader without it gets the built-in copy of the same 36 words).
    """
    (row,) = fetch_all(
        connection,
        "SELECT VERSION(), @@innodb_ft_min_token_size, @@innodb_ft_max_token_size, "
        "@@innodb_ft_enable_stopword, @@innodb_ft_server_stopword_table, "
        "@@innodb_ft_user_stopword_table",
    )
    version, min_token, max_token, enabled, server_table, user_table = row
    stopwords: frozenset[str] = frozenset()
    if int(enabled):
        stopwords = _stopwords(connection, user_table or server_table)
    return ServerInfo(
        flavor=flavor_of(str(version)),
        version=str(version),
        rules=TokenRules(int(min_token), int(max_token), stopwords),
    )


def _stopwords(connection: MySQLConnection, table: object) -> frozenset[str]:
    """Read the stopword list in effect; fall back to InnoDB's defaults if it cannot be read."""
    if table:
        database, _, name = str(table).partition("/")
        source = f"{quote_identifier(database)}.{quote_identifier(name)}"
    else:
        source = "INFORMATION_SCHEMA.INNODB_FT_DEFAULT_STOPWORD"
    try:
        return stopwords_from(fetch_all(connection, f"SELECT value FROM {source}"))  # noqa: S608 - quoted identifiers
    except Exception:  # a reader may lack PROCESS; the defaults are exact
        _log.info("mysql stopword list not readable; using InnoDB's defaults")
        return DEFAULT_STOPWORDS
