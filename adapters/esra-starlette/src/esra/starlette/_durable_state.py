"""durable_state: where a host keeps what administrators change, opened from ``[state]``.

Three things outlive a host process: the configuration workspaces (drafts, their history and
publications), the connection secrets written through the admin API, and the audit log. All
three live in one database — the ``[state] database`` of the settings (an SQLite file or a
PostgreSQL server), or, for the embedded default, ``state.db`` in the data directory:

- configuration: ``SqliteConfigStore`` / ``PostgresConfigStore`` (schema ``esra_config``);
- secrets: an ``EncryptedSecretStore`` over ``SqliteSecretTable`` / ``PostgresSecretTable``
  (schema ``esra_secrets``), behind a ``RoutingSecretStore`` that sends ``env:``/``file:``
  references to each tenant's ``ReferenceSecretResolver`` policy. The key-encryption keyring
  comes from ``[secrets] keyring_file`` / ``keyring_env``, never from the database; the
  embedded default generates ``secret-keyring.json`` (``chmod 600``) on its first start;
- audit: a ``BatchingAuditSink`` over ``SqliteAuditLog`` / ``PostgresAuditLog`` (schema
  ``esra_audit``) or a ``JsonLinesAuditLog``; with ``wait_for_write`` (the default) a call
  is answered only once its records are written, so ``kill -9`` loses none of them. The sink
  is flushed and closed when the host stops.

An administrative change's audit record is saved with the change, in the configuration
store's audit outbox, and forwarded to the audit sink from there (``esra.core.admin``'s
``forward_audit_outbox``). ``open_state`` forwards what is held as soon as the sink is open,
so the records of changes whose process died before delivering them reach the audit log on
the next start.

Everything opened here is closed by the exit stack it is opened on, the audit sink first (so
its last records are written before the log's connection goes).
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import re
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import attrs

from esra.core.admin import InMemorySecretVault, WorkspaceStore, forward_audit_outbox
from esra.core.audit import AuditBackend, AuditReader, BatchingAuditSink, LoggingAuditSink
from esra.core.docstore import StoreStateTable
from esra.core.exceptions import ConfigurationError, ProviderError
from esra.core.ports import AuditSink, Clock, WritableSecretStore
from esra.core.secrets import (
    EncryptedSecretStore,
    KeyEncryptionKeys,
    KeyringConfigurationError,
    ReferencePolicy,
    ReferenceSecretResolver,
    RoutingSecretStore,
    SecretTable,
)
from esra.starlette._settings import StateSettings

__all__ = [
    "EMBEDDED_DATABASES_DIR",
    "KEYRING_FILE",
    "STATE_DATABASE_FILE",
    "DurableState",
    "StateDatabaseError",
    "embedded_state",
    "load_or_create_keyring",
    "open_state",
    "postgres_connect_kwargs",
]

_log = logging.getLogger(__name__)

# The embedded default's state database and keyring, in its data directory.
STATE_DATABASE_FILE = "state.db"
KEYRING_FILE = "secret-keyring.json"
# Where the embedded default looks for the SQLite files of sources modelled through the admin
# API: a directory of their own, so no source can name the state database or the store.
EMBEDDED_DATABASES_DIR = "databases"
# The pseudo-tenant the state database's own connection secrets resolve under.
_STATE_TENANT = "esra-state"
_ENV_REFERENCE = re.compile(r"\$\{secret:env:([A-Za-z_][A-Za-z0-9_]*)\}")
_FILE_REFERENCE = re.compile(r"\$\{secret:file:(/[^}]*)\}")


class StateDatabaseError(ConfigurationError):
    """The state database's connection cannot be resolved (its message names no secret)."""

    public_message = "The state database settings are invalid."


class StateTables(WorkspaceStore, StoreStateTable, Protocol):
    """The state database's configuration store: the admin chain's drafts, history and
    publications, and the document stores' shared lifecycle state."""


@attrs.frozen
class DurableState:
    """What ``open_state`` opened; valid until its exit stack closes.

    ``workspaces`` is ``None`` when the settings keep no state database (drafts then live in
    the admin API's memory, and each process keeps its document stores' lifecycle state);
    ``audit_reader`` is ``None`` when the audit log is not readable back (the logging sink).
    """

    workspaces: StateTables | None
    secrets: RoutingSecretStore = attrs.field(repr=False)
    audit: AuditSink
    audit_reader: AuditReader | None


def embedded_state(data_dir: Path) -> StateSettings:
    """The embedded default's state: everything in ``data_dir/state.db``, a keyring beside it."""
    return StateSettings(
        database=str(data_dir / STATE_DATABASE_FILE),
        keyring_file=data_dir / KEYRING_FILE,
        generate_keyring=True,
        audit_kind="database",
    )


def _keyring_document(key_id: str, material: bytes) -> bytes:
    text = json.dumps({"active": key_id, "keys": {key_id: base64.b64encode(material).decode()}})
    return (text + "\n").encode()


def load_or_create_keyring(path: Path) -> KeyEncryptionKeys:
    """The keyring in ``path``; a new one (one fresh key, ``chmod 600``) if there is none.

    The new key's id is random, so a keyring lost and regenerated never passes for the old
    one: the secrets it wrapped are reported as wrapped by a missing key instead of failing
    one by one. The file is written under another name and linked into place, so two
    processes starting at once agree on one keyring and none reads a half-written file.

    Raises:
        KeyringConfigurationError: ``path`` exists but is unsafe (group/other access, not a
            regular file) or malformed.
    """
    if not path.exists() and not path.is_symlink():
        key_id = f"k-{secrets.token_hex(4)}"
        staging = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
        fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, _keyring_document(key_id, KeyEncryptionKeys.new_key()))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(staging, path)
        except FileExistsError:
            pass  # another process made it first: use theirs
        finally:
            staging.unlink()
    return KeyEncryptionKeys.from_file(path)


def _keyring(state: StateSettings) -> KeyEncryptionKeys:
    if state.keyring_env is not None:
        return KeyEncryptionKeys.from_env(state.keyring_env)
    if state.keyring_file is None:
        msg = "no keyring: name [secrets] keyring_file or keyring_env"
        raise KeyringConfigurationError(msg)
    if state.generate_keyring:
        return load_or_create_keyring(state.keyring_file)
    return KeyEncryptionKeys.from_file(state.keyring_file)


class _OperatorsServer:
    """The state database is the operator's own setting, not a tenant's: its host is allowed."""

    async def is_allowed(self, tenant_id: str, host: str, port: int) -> bool:
        return tenant_id == _STATE_TENANT


async def postgres_connect_kwargs(template: str) -> dict[str, Any]:
    """psycopg connect arguments for the ``[state] database`` template, secrets substituted.

    Only ``${secret:env:NAME}`` and ``${secret:file:/path}`` references resolve here (the
    stored secrets live in this very database).

    Raises:
        StateDatabaseError: the template is malformed or a reference does not resolve.
    """
    from esra.postgres import SCHEMES, connect_kwargs  # noqa: PLC0415
    from esra.sql import resolve_connection  # noqa: PLC0415

    policy = ReferencePolicy(
        env_names=tuple(_ENV_REFERENCE.findall(template)),
        directories=tuple(str(Path(p).parent) for p in _FILE_REFERENCE.findall(template)),
    )
    try:
        target = await resolve_connection(
            template,
            tenant_id=_STATE_TENANT,
            secrets=ReferenceSecretResolver({_STATE_TENANT: policy}),
            allowlist=_OperatorsServer(),
            schemes=SCHEMES,
        )
        kwargs = connect_kwargs(target, connect_timeout_s=10.0)
    except ProviderError as exc:
        msg = f"state.database: {exc.code.value} (set the variables or files it names)"
        raise StateDatabaseError(msg) from None
    kwargs["application_name"] = "esra-state"
    return kwargs


async def _open_sqlite(
    stack: contextlib.AsyncExitStack, database: str, state: StateSettings, *, secrets_wanted: bool
) -> tuple[StateTables, SecretTable | None, Any]:
    from esra.sqlite import SqliteAuditLog, SqliteConfigStore, SqliteSecretTable  # noqa: PLC0415

    path = Path(database)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    config = SqliteConfigStore(path)
    stack.push_async_callback(config.close)
    await config.initialize()
    table = None
    if secrets_wanted:
        table = SqliteSecretTable(path)
        stack.push_async_callback(table.close)
        await table.initialize()
    log = None
    if state.audit_kind == "database":
        log = SqliteAuditLog(path)
        stack.push_async_callback(log.close)
        await log.initialize()
    return config, table, log


async def _open_postgres(
    stack: contextlib.AsyncExitStack, database: str, state: StateSettings, *, secrets_wanted: bool
) -> tuple[StateTables, SecretTable | None, Any]:
    try:
        from esra.postgres import (  # noqa: PLC0415
            PostgresAuditLog,
            PostgresConfigStore,
            PostgresSecretTable,
            apply_audit_schema,
            apply_secret_schema,
        )
    except ImportError as exc:
        msg = "state.database: a postgresql:// state database needs esra-postgres installed"
        raise StateDatabaseError(msg) from exc
    import psycopg  # noqa: PLC0415

    kwargs = await postgres_connect_kwargs(database)
    async with await psycopg.AsyncConnection.connect(**kwargs) as conn:
        if state.apply_schemas:
            await apply_secret_schema(conn, state.secrets_schema)
            if state.audit_kind == "database":
                await apply_audit_schema(conn, state.audit_schema)
        else:
            await _require_applied(conn, state, secrets_wanted=secrets_wanted)
    config = await PostgresConfigStore.open(
        kwargs=kwargs, schema=state.config_schema, apply_schema=state.apply_schemas
    )
    stack.push_async_callback(config.close)
    table = None
    if secrets_wanted:
        table = await PostgresSecretTable.open(kwargs=kwargs, schema=state.secrets_schema)
        stack.push_async_callback(table.close)
    log = None
    if state.audit_kind == "database":
        log = await PostgresAuditLog.open(kwargs=kwargs, schema=state.audit_schema)
        stack.push_async_callback(log.close)
    return config, table, log


async def _require_applied(conn: Any, state: StateSettings, *, secrets_wanted: bool) -> None:
    """With ``apply_schemas = false`` an owner applies the schemas: say so at start rather
    than failing the first request on a missing table.

    Raises:
        StateDatabaseError: a schema the host uses is not applied.
    """
    from esra.postgres import (  # noqa: PLC0415
        AUDIT_SCHEMA_VERSION,
        CONFIG_SCHEMA_VERSION,
        SECRET_SCHEMA_VERSION,
        audit_schema_version,
        config_schema_version,
        secret_schema_version,
    )

    checks = [(state.config_schema, config_schema_version, CONFIG_SCHEMA_VERSION)]
    if secrets_wanted:
        checks.append((state.secrets_schema, secret_schema_version, SECRET_SCHEMA_VERSION))
    if state.audit_kind == "database":
        checks.append((state.audit_schema, audit_schema_version, AUDIT_SCHEMA_VERSION))
    # Behind counts as missing: an upgrade's new tables (the configuration schema's store
    # states) would otherwise fail the first request that reaches them.
    missing = [schema for schema, version, target in checks if await version(conn, schema) < target]
    if missing:
        msg = (
            f"state.database: apply_schemas is false and {', '.join(missing)} "
            "is not applied at this release's version: have its owner run "
            "`esra migrate --config SETTINGS`"
        )
        raise StateDatabaseError(msg)


async def _encrypted(table: SecretTable, state: StateSettings) -> EncryptedSecretStore:
    store = EncryptedSecretStore(table, _keyring(state))
    missing = await store.missing_keks()
    if missing:
        # Starting anyway would fail every such secret later, one connection at a time.
        msg = (
            f"the secret table holds secrets wrapped by key ids the keyring lacks "
            f"({', '.join(missing)}): restore those keys to the keyring"
        )
        raise KeyringConfigurationError(msg)
    return store


async def _deliver_held_audit(workspaces: StateTables, audit: AuditSink) -> None:
    """Forward the audit records a process saved with its changes but did not deliver.

    A sink that refuses them now leaves them held for the next change or start: the host
    still starts, and nothing is lost.
    """
    try:
        delivered = await forward_audit_outbox(workspaces, audit)
    except Exception as exc:
        _log.warning(
            "held audit records of administrative changes could not be delivered yet (%s); "
            "they stay in the state database",
            type(exc).__name__,
        )
        return
    if delivered:
        _log.info("delivered %d held audit records of administrative changes", delivered)


async def open_state(
    stack: contextlib.AsyncExitStack,
    state: StateSettings,
    *,
    policies: Mapping[str, ReferencePolicy],
    clock: Clock,
    secrets: WritableSecretStore | None = None,
    audit: AuditSink | None = None,
) -> DurableState:
    """Open what ``state`` describes on ``stack`` (closed, audit flushed, when it exits).

    Args:
        stack: owns everything opened.
        state: the settings' (or the embedded default's) state.
        policies: per tenant, which ``env:``/``file:`` references it may resolve.
        clock: the audit sink's clock.
        secrets: an injected store for stored secrets (no secret table is opened).
        audit: an injected audit sink (no audit log is opened, none is readable back).

    Audit records held in the state database's outbox are forwarded to the audit sink before
    it returns.

    Raises:
        KeyringConfigurationError: the keyring is missing, unsafe or lacks a key in use.
        StateDatabaseError: the PostgreSQL template does not resolve or esra-postgres is
            not installed.
        sqlite3.Error, psycopg.Error: the database cannot be opened.
    """
    external = ReferenceSecretResolver(policies)
    workspaces: StateTables | None = None
    table: SecretTable | None = None
    log: Any = None
    if state.database is not None:
        opener = _open_postgres if state.on_postgres else _open_sqlite
        workspaces, table, log = await opener(
            stack,
            state.database,
            attrs.evolve(state, audit_kind="injected") if audit is not None else state,
            secrets_wanted=secrets is None,
        )
    stored: WritableSecretStore
    if secrets is not None:
        stored = secrets
    elif table is not None:
        stored = await _encrypted(table, state)
    else:
        stored = InMemorySecretVault()
    reader: AuditReader | None = None
    if audit is None:
        backend: AuditBackend | None = None
        if state.audit_kind == "database":
            backend = reader = log
        elif state.audit_kind == "jsonl" and state.audit_path is not None:
            from esra.core.audit import JsonLinesAuditLog  # noqa: PLC0415

            backend = reader = JsonLinesAuditLog(state.audit_path)
        if backend is None:
            audit = LoggingAuditSink()
        else:
            sink = BatchingAuditSink(
                backend,
                flush_interval_s=state.flush_interval_ms / 1000,
                wait_for_write=state.wait_for_write,
                clock=clock,
            )
            stack.push_async_callback(sink.aclose)
            audit = sink
    if workspaces is not None:
        await _deliver_held_audit(workspaces, audit)
    return DurableState(
        workspaces=workspaces,
        secrets=RoutingSecretStore(stored=stored, external=external),
        audit=audit,
        audit_reader=reader,
    )
