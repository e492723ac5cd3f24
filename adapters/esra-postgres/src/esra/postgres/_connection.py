"""Turn a resolved connection template into psycopg connect arguments, and scrub values.

The template (``postgresql://user:${secret:NAME}@host:5432/db?sslmode=require``) has already
been parsed, allow-listed and had its secrets substituted by ``esra.sql.resolve_connection``.
Only the libpq options below may come from its query string: nothing that could point libpq
at another host, file-based credentials, a service file or server-side settings (``options``
could otherwise switch ``default_transaction_read_only`` off), so the host the allowlist judged
is the host connected to.

Nor does a connection take anything libpq would otherwise fill in from the process: the
``PGPASSWORD`` variable, the password file (``PGPASSFILE``, ``~/.pgpass``), a client
certificate (``PGSSLCERT``/``PGSSLKEY``, ``~/.postgresql/postgresql.crt``), ``PGOPTIONS``,
those values from a service file (``PGSERVICE``), or the process's Kerberos ticket (GSSAPI
authentication or encryption). They belong to the whole process, and a tenant may use only
the secrets its policy names (docs/secrets.md): ``connect_kwargs`` sets each one explicitly,
so a template naming no password logs in with none. For the same reason the client key a
template names (``sslkey``, ``PRIVATE_FILE_OPTIONS``) must be a file the tenant's policy lets
it read as ``${secret:file:…}``; ``resolve_connection`` checks it with the tenant's secrets.
"""

from __future__ import annotations

import os
from typing import Any

import psycopg

from esra.core.codes import ProviderErrorCode
from esra.core.exceptions import ProviderError
from esra.sql import ConnectionTarget, check_public_file, utf8_bindable

__all__ = [
    "ALLOWED_OPTIONS",
    "PRIVATE_FILE_OPTIONS",
    "PUBLIC_FILE_OPTIONS",
    "SCHEMES",
    "connect_kwargs",
    "scrub",
    "storable_json",
]

SCHEMES = {"postgresql": 5432, "postgres": 5432}

ALLOWED_OPTIONS = frozenset(
    {
        "application_name",
        "channel_binding",
        "connect_timeout",
        "gssencmode",
        "keepalives",
        "keepalives_count",
        "keepalives_idle",
        "keepalives_interval",
        "sslcert",
        "sslcrl",
        "sslkey",
        "sslmode",
        "sslpassword",
        "sslrootcert",
        "target_session_attrs",
        "tcp_user_timeout",
    }
)

# The options naming a private file: the client key is a credential, so the tenant's secret
# policy must allow it as a ``file:`` reference. A certificate (``sslcert``, ``sslrootcert``)
# and a revocation list (``sslcrl``) are public: any regular file libpq can read.
PRIVATE_FILE_OPTIONS = frozenset({"sslkey"})
# The options naming a public file libpq reads itself: each must be a regular file
# (``esra.sql.check_public_file``); ``sslrootcert=system`` names the system's store.
PUBLIC_FILE_OPTIONS = frozenset({"sslcert", "sslcrl", "sslrootcert"})

_KERBEROS_OFF = "disable"  # the only gssencmode a template may give (see connect_kwargs)
_LIBPQ_OPTIONS = frozenset(
    option.keyword.decode() for option in psycopg.pq.Conninfo.get_defaults() if option.keyword
)
# Authentication methods libpq may answer: any but GSSAPI and SSPI, which log in with the
# process's Kerberos ticket or Windows account. libpq 16 and later enforce it
# (``require_auth``); an older libpq with GSSAPI is asked for a service principal no
# server has, so the handshake fails before any ticket is sent for a real one.
_AUTHENTICATION = (
    {"require_auth": "!gss,!sspi"}
    if "require_auth" in _LIBPQ_OPTIONS
    else {"krbsrvname": "esra-no-kerberos"}
    if "krbsrvname" in _LIBPQ_OPTIONS
    else {}
)
_GSS_ENCRYPTION = {"gssencmode": _KERBEROS_OFF} if "gssencmode" in _LIBPQ_OPTIONS else {}

# A path at which no file can exist (a name under the null device, which is no directory):
# libpq, which goes on without a password file or client certificate it cannot find, finds
# none here. os.devnull itself would do too, but libpq warns on stderr that it is no plain file.
_NO_FILE = os.path.join(os.devnull, "esra-none")


def connect_kwargs(target: ConnectionTarget, *, connect_timeout_s: float) -> dict[str, Any]:
    """Return keyword arguments for ``psycopg.AsyncConnection.connect``.

    Connections are autocommit: the provider opens every transaction itself, ``BEGIN READ
    ONLY``, so none is ever left open implicitly. Nothing is prepared server-side
    (``prepare_threshold=None``): psycopg's automatic preparation after five executions let
    PostgreSQL switch the full-text statements to generic plans, which ran them about twice
    as slowly, and a prepared statement is session state a transaction-mode PgBouncer
    cannot carry from one transaction to the next.

    The password, password file, client certificate, server options and Kerberos are always
    set, so libpq takes none of them from the process (see the module's docstring): a
    template with no password sends none (an empty value set explicitly is not replaced by
    ``PGPASSWORD`` or a service file's, and the password file libpq then reads is one that
    cannot exist), one with no ``sslcert`` presents no certificate, and GSSAPI encryption and
    authentication are off.

    Raises:
        ProviderError: ``CONNECTION_TEMPLATE_INVALID`` for an option outside
            ``ALLOWED_OPTIONS``, an ``sslcert`` without the ``sslkey`` libpq would otherwise
            look for in ``PGSSLKEY`` or the home directory, a ``gssencmode`` other than
            ``disable``, or a certificate option (``PUBLIC_FILE_OPTIONS``) naming no regular
            file.
    """
    kwargs: dict[str, Any] = {
        "host": target.host,
        "port": target.port,
        "dbname": target.database,
        "connect_timeout": max(1, round(connect_timeout_s)),
        "application_name": "esra",
        "autocommit": True,
        "prepare_threshold": None,
        "password": target.password,
        "passfile": _NO_FILE,
        "sslcert": _NO_FILE,
        "options": "",
        **_AUTHENTICATION,
        **_GSS_ENCRYPTION,
    }
    if target.user:
        kwargs["user"] = target.user
    for name, value in target.options:
        if name not in ALLOWED_OPTIONS:
            raise _invalid("unsupported connection option")
        kwargs[name] = value
    if not kwargs["sslcert"]:  # libpq reads an empty one as "the default file"
        kwargs["sslcert"] = _NO_FILE
    for option in PUBLIC_FILE_OPTIONS:
        path = kwargs.get(option)
        if path and path != _NO_FILE and not (option == "sslrootcert" and path == "system"):
            check_public_file(str(path))
    if kwargs["sslcert"] != _NO_FILE and not kwargs.get("sslkey"):
        raise _invalid("sslcert without sslkey")
    if kwargs.get("gssencmode", _KERBEROS_OFF) != _KERBEROS_OFF:
        raise _invalid("gssencmode other than disable")
    return kwargs


def _invalid(note: str) -> ProviderError:
    error = ProviderError(ProviderErrorCode.CONNECTION_TEMPLATE_INVALID)
    error.add_note(note)  # for the log only
    return error


def storable_json(value: Any) -> Any:
    """A JSON document with every NUL in its text (keys too) replaced by U+FFFD, as
    ``scrub`` replaces it in a bound value: ``jsonb`` refuses NUL, and an audit record held
    in an outbox that could not be stored would fail the action it records."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {storable_json(key): storable_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [storable_json(item) for item in value]
    return value


def scrub(value: object) -> object:
    """Make a ``str`` bindable: NUL and lone surrogates become U+FFFD.

    PostgreSQL text cannot hold NUL and UTF-8 cannot carry a lone surrogate (undecodable
    input), so such a value could never equal stored text anyway; the replacement keeps it a
    literal instead of failing the bind on the client.
    """
    if isinstance(value, str) and "\x00" in value:
        value = value.replace("\x00", "\ufffd")
    return utf8_bindable(value)
