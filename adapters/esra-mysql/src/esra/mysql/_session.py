"""Open one provider session: mysql-connector-python's pure-Python connection, read-only.

The pure-Python ``MySQLConnection`` is used on every platform, never the C extension
``mysql.connector.connect`` picks wherever it loads: one implementation, so one set of row
types and behaviours whatever the host, and the signatures of the connection-level
prepared-statement calls ``esra.mysql._prepared`` makes (the C extension's differ). The
26.x wheels' C extension does not even load against Debian 12's OpenSSL 3.0.

What the session is, whatever the driver's defaults:

- utf8mb4, autocommit, and ``SET SESSION TRANSACTION READ ONLY``: every statement is a
  read-only transaction of its own.
- No ``CLIENT_MULTI_STATEMENTS`` (the driver asks for it by default): a text command is one
  statement. No ``LOAD DATA LOCAL``.
- TLS exactly as the connection template says: none without ``ssl_ca`` or
  ``ssl_verify_identity`` (the driver would otherwise negotiate it whenever the server
  offers it); ``ssl_ca`` alone encrypts with that CA loaded, without verifying the server;
  ``ssl_verify_identity`` verifies the certificate chain and the host name.
- ``connect_timeout`` bounds the connection and handshake only; reads are unbounded (the
  statement's own limit and ``KILL QUERY`` end a statement).
- ``TCP_NODELAY``: the driver does not set it, and a statement's close (which has no reply)
  followed by the next command would otherwise wait on the server's delayed ACK, about 40 ms
  on Linux.
"""

from __future__ import annotations

import contextlib
import logging
import socket
from typing import Any

from mysql.connector.connection import MySQLConnection
from mysql.connector.constants import ClientFlag

from esra.sql import ConnectionTarget

__all__ = ["open_session"]

_log = logging.getLogger("esra.mysql")

_TRUE = frozenset({"1", "true", "yes", "on"})


def open_session(target: ConnectionTarget, *, connect_timeout_s: float) -> MySQLConnection:
    """Connect to ``target`` and make the session read-only.

    Raises:
        mysql.connector.Error: the connection, login or session setup failed.
    """
    timeout = target.option("connect_timeout")
    verify = (target.option("ssl_verify_identity", "") or "").lower() in _TRUE
    ssl_ca = target.option("ssl_ca")
    tls: dict[str, Any] = {"ssl_disabled": True}
    if ssl_ca or verify:
        tls = {"ssl_verify_cert": verify, "ssl_verify_identity": verify}
        if ssl_ca:
            tls["ssl_ca"] = ssl_ca
    connection = MySQLConnection(
        host=target.host,
        port=target.port,
        user=target.user,
        password=target.password,
        database=target.database or None,
        charset="utf8mb4",
        connection_timeout=int(timeout) if timeout else connect_timeout_s,
        autocommit=True,
        allow_local_infile=False,
        client_flags=[-ClientFlag.MULTI_STATEMENTS],
        **tls,
    )
    try:
        _no_delay(connection)
        connection.cmd_query("SET SESSION TRANSACTION READ ONLY")
    except BaseException:
        connection.close()
        raise
    return connection


def _no_delay(connection: MySQLConnection) -> None:
    """Turn Nagle's algorithm off on the connection's TCP socket (a latency matter only)."""
    sock = getattr(getattr(connection, "_socket", None), "sock", None)
    if not isinstance(sock, socket.socket) or sock.family not in {socket.AF_INET, socket.AF_INET6}:
        _log.warning("mysql connection socket not found: TCP_NODELAY not set")
        return
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
