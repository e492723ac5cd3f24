"""Connection templates: where a server provider connects, resolved safely per tenant.

A source's ``connection_ref`` is a connection *template*: a URL whose credentials are secret
references, never secrets, for example::

    postgresql://esra_reader:${secret:sales-db-password}@db.internal:5432/sales?sslmode=require

Resolution, before any socket opens:

1. the template is parsed; anything malformed — an unknown scheme, no host, a bad port, a
   placeholder anywhere but the user name, password or a query value — is
   ``CONNECTION_TEMPLATE_INVALID``;
2. every ``${secret:NAME}`` is resolved through the ``SecretStore`` *with the source's tenant*
   (``SECRET_UNRESOLVED`` when it does not resolve), so one tenant's reference never reaches
   another tenant's secret;
3. the literal host and port are checked through the ``HostAllowlist`` with the tenant id
   (``HOST_NOT_ALLOWED``), so one tenant's allowlisted host does not become another's;
4. an option an engine names as a *private file* (libpq's ``sslkey``, a client key the
   driver reads from disk) must name a file the tenant could read as the secret reference
   ``file:PATH`` (``SECRET_UNRESOLVED`` otherwise): the key is a credential like a password,
   and the files of the host belong to every tenant on it, so the tenant's secret policy
   (docs/secrets.md) — not the template — decides which key files it may present.

The host is never a placeholder: the allowlist must judge the host the configuration names,
not one a secret could swap in.

References hold ":" and, for files, "/" (``${secret:env:PGUSER}``,
``${secret:file:/run/secrets/pw}``): before the URL is split, the ":" and "/" inside each
placeholder are percent-encoded (``encode_placeholders``), so a reference written plainly
never splits the user name from the password or ends the authority; the parts are decoded
again after the split, as a percent-encoded template always was.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import re
import stat
from collections.abc import Mapping
from urllib.parse import parse_qsl, quote, unquote, urlsplit

import attrs

from esra.core.codes import ProviderErrorCode
from esra.core.exceptions import EsraError, ProviderError
from esra.core.ports import HostAllowlist, SecretStore

__all__ = [
    "RESOLVE_TIMEOUT_S",
    "ConnectionTarget",
    "ConnectionTemplate",
    "SourceConnection",
    "encode_placeholders",
    "resolve_connection",
]

# How long a worker thread's opener waits for the secret store, like a driver's connect
# timeout: a store that hangs fails the connection as TIMEOUT instead of holding the thread.
RESOLVE_TIMEOUT_S = 10.0

# How an option naming a private file is checked: as this external secret reference
# (``file:/path``), under the tenant's policy for secret files.
_FILE_REFERENCE_PREFIX = "file:"
_PLACEHOLDER = re.compile(r"\$\{secret:([A-Za-z0-9][A-Za-z0-9_.:/-]{0,199})\}")
_ANY_PLACEHOLDER = re.compile(r"\$\{")
_HOST = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.?)+$|^\[[0-9A-Fa-f:.]+\]$")


def _invalid(reason: str) -> ProviderError:
    error = ProviderError(ProviderErrorCode.CONNECTION_TEMPLATE_INVALID)
    error.add_note(reason)  # for the log; the error's message stays the code alone
    return error


def check_public_file(path: str) -> None:
    """Refuse ``path`` unless it names a regular file: a certificate, CA bundle or revocation
    list a connection template names for the driver to read itself.

    Such files are public, so they are not confined to the tenant's secret directories as a
    client key is, but the driver opens whatever path it is given and reads it to the end: a
    FIFO, a terminal or one of the process's own pipes (``/dev/stdin``,
    ``/proc/self/fd/N``) blocks that read for ever — with libpq, inside the event loop's
    connect, so every request of the host hangs — and a directory or a missing file is a
    template that can never connect.

    Raises:
        ProviderError: ``CONNECTION_TEMPLATE_INVALID``.
    """
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError) as exc:  # missing, unreadable, or a NUL in the path
        raise _invalid("a certificate option names no file") from exc
    if not stat.S_ISREG(mode):
        raise _invalid("a certificate option names no regular file")


def encode_placeholders(text: str) -> str:
    """``text`` with the ":" and "/" inside each ``${secret:...}`` percent-encoded, so a
    URL parser splits it where the template's own separators are, never inside a reference."""
    return _PLACEHOLDER.sub(lambda match: quote(match.group(0), safe="${}"), text)


def _secret_names(text: str) -> tuple[str, ...]:
    names = tuple(_PLACEHOLDER.findall(text))
    if len(_ANY_PLACEHOLDER.findall(text)) != len(names):
        raise _invalid("malformed secret placeholder")
    return names


@attrs.frozen
class ConnectionTemplate:
    """A parsed connection template: literal host and port, secret references elsewhere."""

    scheme: str
    host: str
    port: int
    database: str
    user: str
    password: str = attrs.field(repr=False)
    options: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, text: str, *, schemes: Mapping[str, int]) -> ConnectionTemplate:
        """Parse ``text``; ``schemes`` maps each accepted scheme to its default port.

        Raises:
            ProviderError: ``CONNECTION_TEMPLATE_INVALID`` for anything malformed.
        """
        try:
            parts = urlsplit(encode_placeholders(text))
            port = parts.port
        except ValueError as exc:
            raise _invalid("unparseable URL or port") from exc
        scheme = parts.scheme.lower()
        if scheme not in schemes:
            raise _invalid("unsupported scheme")
        host = parts.hostname or ""
        if not host or "${" in host or not _HOST.match(host if ":" not in host else f"[{host}]"):
            raise _invalid("missing or invalid host")
        if parts.fragment:
            raise _invalid("fragments are not allowed")
        database = unquote(parts.path.lstrip("/"))
        if "${" in database or "/" in database:
            raise _invalid("invalid database name")
        user = unquote(parts.username or "")
        password = unquote(parts.password or "")
        for value in (user, password):
            _secret_names(value)
        try:
            options = tuple(parse_qsl(parts.query, keep_blank_values=True, strict_parsing=False))
        except ValueError as exc:
            raise _invalid("invalid query string") from exc
        for key, value in options:
            if "${" in key:
                raise _invalid("placeholder in an option name")
            _secret_names(value)
        return cls(
            scheme=scheme,
            host=host.lower(),
            port=port if port is not None else schemes[scheme],
            database=database,
            user=user,
            password=password,
            options=options,
        )


@attrs.frozen
class ConnectionTarget:
    """A resolved connection: every secret substituted, the host allowed for the tenant."""

    host: str
    port: int
    database: str
    user: str
    password: str = attrs.field(repr=False)
    options: tuple[tuple[str, str], ...] = attrs.field(default=(), repr=False)

    def option(self, name: str, default: str | None = None) -> str | None:
        """Return the last value of the query option ``name``."""
        found = [value for key, value in self.options if key == name]
        return found[-1] if found else default


async def _substitute(text: str, *, tenant_id: str, secrets: SecretStore) -> str:
    values = {name: await _resolve_secret(name, tenant_id, secrets) for name in _secret_names(text)}
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], text)


async def _resolve_secret(reference: str, tenant_id: str, secrets: SecretStore) -> str:
    try:
        return await secrets.resolve(tenant_id, reference)
    except ProviderError:
        raise
    except EsraError as exc:
        raise ProviderError(ProviderErrorCode.SECRET_UNRESOLVED) from exc
    except Exception as exc:
        # A secret store's own failure must not leak its text or pass as another code.
        raise ProviderError(ProviderErrorCode.SECRET_UNRESOLVED) from exc


async def resolve_connection(
    template: str,
    *,
    tenant_id: str,
    secrets: SecretStore,
    allowlist: HostAllowlist,
    schemes: Mapping[str, int],
    private_file_options: frozenset[str] = frozenset(),
) -> ConnectionTarget:
    """Resolve ``template`` for ``tenant_id``: parse, check the host, substitute secrets.

    The host is checked before any secret is read, so a disallowed host costs no secret
    lookup; no socket is opened here. Each non-empty option named in
    ``private_file_options`` must then resolve as the reference ``file:`` + its value for
    the tenant (what is read is discarded; the driver reads the file itself).

    Raises:
        ProviderError: ``CONNECTION_TEMPLATE_INVALID``, ``HOST_NOT_ALLOWED`` or
            ``SECRET_UNRESOLVED``.
    """
    parsed = ConnectionTemplate.parse(template, schemes=schemes)
    try:
        allowed = await allowlist.is_allowed(tenant_id, parsed.host, parsed.port)
    except Exception as exc:
        # An allowlist that cannot answer is a "no": fail closed.
        raise ProviderError(ProviderErrorCode.HOST_NOT_ALLOWED) from exc
    if not allowed:
        raise ProviderError(ProviderErrorCode.HOST_NOT_ALLOWED)
    options = []
    for key, value in parsed.options:
        options.append((key, await _substitute(value, tenant_id=tenant_id, secrets=secrets)))
    for key, value in options:
        if key in private_file_options and value:
            await _resolve_secret(f"{_FILE_REFERENCE_PREFIX}{value}", tenant_id, secrets)
    return ConnectionTarget(
        host=parsed.host,
        port=parsed.port,
        database=parsed.database,
        user=await _substitute(parsed.user, tenant_id=tenant_id, secrets=secrets),
        password=await _substitute(parsed.password, tenant_id=tenant_id, secrets=secrets),
        options=tuple(options),
    )


class SourceConnection:
    """One source's connection template with what resolves it: its tenant, secrets, allowlist.

    Every connection an engine opens resolves the template anew, so a rotated secret or a
    host taken off the allowlist takes effect for the next connection without reopening the
    provider. An async driver awaits ``resolve()``; a synchronous one opens its connections
    on worker threads, whose opener calls ``resolve_from_thread()``: the resolution runs on
    the event loop that last awaited ``target()``, since secret stores are asynchronous.

    Args:
        template: the source's connection template (``connection_ref``).
        tenant_id: the source's tenant; secrets and the allowlist are consulted with it.
        secrets: resolves ``${secret:NAME}`` references for the tenant.
        allowlist: must allow the template's host and port for the tenant.
        schemes: the engine's accepted schemes and their default ports.
        private_file_options: the engine's options that name a private key file, each
            checked as a ``file:`` secret of the tenant (``resolve_connection``).
    """

    def __init__(
        self,
        template: str,
        *,
        tenant_id: str,
        secrets: SecretStore,
        allowlist: HostAllowlist,
        schemes: Mapping[str, int],
        private_file_options: frozenset[str] = frozenset(),
    ) -> None:
        self._template = template
        self._tenant_id = tenant_id
        self._secrets = secrets
        self._allowlist = allowlist
        self._schemes = schemes
        self._private_file_options = private_file_options
        self._kept: ConnectionTarget | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def template(self) -> str:
        """The template as configured (for an engine's own checks of its options)."""
        return self._template

    async def resolve(self) -> ConnectionTarget:
        """Resolve the template anew (``resolve_connection``): a rotated secret or a host
        taken off the allowlist takes effect for the connection about to open.

        Raises:
            ProviderError: ``CONNECTION_TEMPLATE_INVALID``, ``HOST_NOT_ALLOWED`` or
                ``SECRET_UNRESOLVED``.
        """
        return await resolve_connection(
            self._template,
            tenant_id=self._tenant_id,
            secrets=self._secrets,
            allowlist=self._allowlist,
            schemes=self._schemes,
            private_file_options=self._private_file_options,
        )

    async def target(self) -> ConnectionTarget:
        """The template resolved once, checked before any work reaches a worker thread.

        An engine awaits it before each piece of work it hands to a thread: the first call
        resolves (so a bad template, host or secret fails on the event loop, classified,
        before a thread is involved), later calls return that first resolution for the
        engine's own checks of its options. Each call also names the running loop as the
        one ``resolve_from_thread`` resolves on.

        Raises:
            ProviderError: as ``resolve`` does, until one resolution succeeds.
        """
        self._loop = asyncio.get_running_loop()
        if self._kept is None:
            self._kept = await self.resolve()
        return self._kept

    def resolve_from_thread(self, timeout_s: float = RESOLVE_TIMEOUT_S) -> ConnectionTarget:
        """Resolve the template anew for a connection a worker thread is about to open.

        Raises:
            ProviderError: as ``resolve`` does; ``TIMEOUT`` when the secret store has not
                answered within ``timeout_s``; ``UNKNOWN`` when no event loop awaited
                ``target()`` or when called on that loop's own thread (which would wait on
                itself forever).
        """
        loop = self._loop
        if loop is None or loop.is_closed() or _running_loop() is loop:
            raise ProviderError(ProviderErrorCode.UNKNOWN)
        future = asyncio.run_coroutine_threadsafe(self.resolve(), loop)
        try:
            return future.result(timeout_s)
        except concurrent.futures.TimeoutError as exc:
            future.cancel()
            raise ProviderError(ProviderErrorCode.TIMEOUT) from exc


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
