"""``esra serve --config esra.toml``: the host's TOML settings, validated with clear errors.

Every problem is a :class:`SettingsError` whose message starts with the key it concerns
(``issuers[0].algorithms: ...``); unknown keys are errors too, so a misspelt key never
silently falls back to a default. Relative paths are read relative to the TOML file. Files
the settings name (JWKS, tenant configuration documents, document-reference keys) are read
and checked here, so a bad deployment fails at start-up, not on its first request.

The layout (every key is documented in ``docs/host.md``)::

    [server]    resource_url, allowed_hosts, allowed_origins, resource_name
    [fetch]     hourly_chars, document_ref_ttl_s, keys_file
    [model]     kind, and per kind: embeddings, embeddings_cache, embeddings_cache_entries,
                base_url, model, api_key_env, endpoint, deployment, api_version, timeout_s,
                max_retries, max_tokens, allow_insecure_http
    [[issuers]] issuer, audience, jwks | jwks_file, algorithms, tenant_claim,
                client_claims, leeway_s, tenants
    [[tenants]] id, config, databases, outbound_hosts,
                [tenants.secrets] env_names, env_prefixes, directories, private_files_only,
                [tenants.sources.<source id>] the source's provider options
    [state]     database, config_schema, secrets_schema, audit_schema, apply_schemas,
                config_poll_s, audit_forward_s
    [secrets]   keyring_file | keyring_env
    [audit]     kind, path, flush_interval_ms, wait_for_write
    [redis]     url | url_env, cache, quota, breakers, key_prefix, max_connections
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import attrs

from esra.core.admin import DEFAULT_AUDIT_FORWARD_S
from esra.core.config import (
    ConfigSnapshot,
    Source,
    check_no_literal_password,
    holds_literal_password,
    load_snapshot,
)
from esra.core.docstore import (
    MAX_ATTEMPTS_CEILING,
    MAX_BATCH_CEILING,
    ConfigurableSettings,
    StoreSettingsError,
    installed_store_kinds,
)
from esra.core.exceptions import ConfigurationError
from esra.core.fetch import DEFAULT_HOURLY_FETCH_CHARS, DEFAULT_REF_TTL_S, KEY_BYTES, Keyring
from esra.core.hosting import DEFAULT_POLL_S, HEALTH_PROBE_TIMEOUT_S, HEALTH_TTL_S, parse_host_port
from esra.core.providers import installed_provider_kinds
from esra.core.secrets import DENY_ALL, ReferencePolicy
from esra.llm import DEFAULT_MAX_ENTRIES, is_loopback_url
from esra.sql import encode_placeholders
from esra.sqlite import STORE_PROVIDER_KIND
from esra.starlette._devtoken import DEV_ISSUER
from esra.starlette._issuers import (
    DEFAULT_CLIENT_CLAIMS,
    DEFAULT_LEEWAY_S,
    DEFAULT_TENANT_CLAIM,
    IssuerError,
    TrustedIssuer,
)
from esra.starlette._shared_state import (
    DEFAULT_REDIS_CONNECTIONS,
    DEFAULT_REDIS_PREFIX,
    RedisSettings,
)
from esra.starlette._telemetry_export import TelemetrySettings

__all__ = [
    "FILE_PROVIDER_KINDS",
    "MODEL_KINDS",
    "HostSettings",
    "ModelSettings",
    "ServerSettings",
    "SettingsError",
    "StateSettings",
    "TenantSettings",
    "database_path",
    "load_settings",
    "parse_settings",
]

MODEL_KINDS = frozenset({"local", "openai", "azure-openai", "anthropic"})
# The keys each model kind takes besides ``kind``; any other key is refused for that kind.
# Every remote kind takes these: the call's budget and retries, and the opt-in to plain http
# to a host other than this machine (see ``_model_url``).
_REMOTE_MODEL_KEYS = frozenset({"api_key_env", "timeout_s", "max_retries", "allow_insecure_http"})
_MODEL_KEYS: dict[str, frozenset[str]] = {
    "local": frozenset({"embeddings", "embeddings_cache", "embeddings_cache_entries"}),
    "openai": frozenset({"base_url", "model"}) | _REMOTE_MODEL_KEYS,
    "azure-openai": frozenset({"endpoint", "deployment", "api_version"}) | _REMOTE_MODEL_KEYS,
    "anthropic": frozenset({"model", "base_url", "max_tokens"}) | _REMOTE_MODEL_KEYS,
}
_ALL_MODEL_KEYS = frozenset(key for keys in _MODEL_KEYS.values() for key in keys)
ANTHROPIC_BASE_URL = "https://api.anthropic.com"
# A portable environment variable name: a key pasted here by mistake never matches it
# (keys carry "-"), so the refusal needs no quote of the value.
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# The provider kinds whose ``connection_ref`` is a database file inside the tenant's
# ``databases`` directory; every other kind's is a connection template (a URL whose
# credentials are ``${secret:...}`` references, its host checked against ``outbound_hosts``).
FILE_PROVIDER_KINDS = frozenset({"sqlite", STORE_PROVIDER_KIND})
AUDIT_KINDS = frozenset({"database", "jsonl", "logging"})
_POSTGRES_SCHEMES = ("postgresql://", "postgres://")
# The PostgreSQL schemas ESRA's own state lives in unless [state] names others.
DEFAULT_STATE_SCHEMAS = {
    "config_schema": "esra_config",
    "secrets_schema": "esra_secrets",
    "audit_schema": "esra_audit",
}
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


class SettingsError(ValueError):
    """The settings are unusable; the message names the key and the problem."""


@attrs.frozen
class ServerSettings:
    """How the endpoint presents itself; ``resource_url`` defaults to the bound address."""

    resource_url: str | None = None
    allowed_hosts: tuple[str, ...] | None = None
    allowed_origins: tuple[str, ...] = ()
    resource_name: str = "ESRA enterprise search"
    hourly_fetch_chars: int = DEFAULT_HOURLY_FETCH_CHARS
    document_ref_ttl_s: float = DEFAULT_REF_TTL_S
    # ``[server] source_health_timeout_s`` / ``source_health_ttl_s``: see ``Retriever``.
    health_probe_timeout_s: float = HEALTH_PROBE_TIMEOUT_S
    health_ttl_s: float = HEALTH_TTL_S


@attrs.frozen
class TenantSettings:
    """One served tenant: its configuration, where its SQLite databases live, and what its
    server sources may use.

    Attributes:
        snapshot: the tenant's configuration.
        databases: the directory file-based sources name their files in.
        outbound_hosts: the ``host:port`` pairs its connection templates may name.
        secret_policy: which environment variables and secret-file directories its
            ``${secret:env:...}`` / ``${secret:file:...}`` references may read.
        source_options: per source id, the provider options its factory receives.
    """

    snapshot: ConfigSnapshot
    databases: Path
    outbound_hosts: tuple[str, ...] = ()
    secret_policy: ReferencePolicy = DENY_ALL
    source_options: Mapping[str, Mapping[str, object]] = attrs.field(factory=dict)

    @property
    def id(self) -> str:
        """The tenant id."""
        return self.snapshot.tenant_id


@attrs.frozen
class ModelSettings:
    """Which language model the host uses: ``[model]``, validated for its ``kind``.

    The key itself is never part of the settings: ``api_key_env`` names the environment
    variable holding it, read by :meth:`api_key` when the host starts.
    """

    kind: str = "local"
    model: str | None = None
    base_url: str | None = None
    endpoint: str | None = None
    deployment: str | None = None
    api_version: str | None = None
    api_key_env: str | None = None
    timeout_s: float = 10.0
    max_retries: int = 2
    max_tokens: int = 4096
    # Plain http to a host other than loopback: the key and the prompts in cleartext.
    allow_insecure_http: bool = False
    # kind "local" only: blend sentence-embedding similarity into the rerank (the
    # ``esra-llm[embeddings]`` extra must be installed).
    embeddings: bool = False
    # kind "local" with embeddings only: the SQLite file keeping the vectors across restarts
    # (``esra.llm.EmbeddingCache``), and how many it keeps.
    embeddings_cache: Path | None = None
    embeddings_cache_entries: int = DEFAULT_MAX_ENTRIES

    def api_key(self, environ: Mapping[str, str]) -> str | None:
        """The key from ``environ``; ``None`` when no variable is named (a local server).

        Raises:
            SettingsError: the named variable is unset or empty (its name is given, never a
                value).
        """
        if self.api_key_env is None:
            return None
        key = environ.get(self.api_key_env, "")
        if not key.strip():
            msg = f"model.api_key_env: the environment variable {self.api_key_env} is not set"
            raise SettingsError(msg)
        return key


@attrs.frozen
class StateSettings:
    """Where the host keeps what administrators change: ``[state]``, ``[secrets]``, ``[audit]``.

    Attributes:
        database: an SQLite file (absolute) or a ``postgresql://`` connection template whose
            password is a ``${secret:env:NAME}`` / ``${secret:file:/path}`` reference; the
            configuration workspaces, the encrypted secret table and (``audit_kind =
            "database"``) the audit log live there. ``None``: drafts and stored secrets are
            kept in memory only (the behaviour of settings without ``[state]``).
        config_schema, secrets_schema, audit_schema: the PostgreSQL schemas (ignored for
            SQLite).
        apply_schemas: apply the schemas at start (idempotent); ``False`` when an owner role
            applied them and the host's role may only use them.
        keyring_file: the key-encryption keyring file (``chmod 600``).
        keyring_env: or the environment variable holding the keyring.
        generate_keyring: create ``keyring_file`` on first start when it is missing (the
            embedded default only; a configured host's keyring is the operator's).
        audit_kind: ``database`` (the state database), ``jsonl`` (``audit_path``) or
            ``logging`` (the ``esra.audit`` logger, not readable back).
        audit_path: the JSON-lines file of ``audit_kind = "jsonl"``.
        flush_interval_ms: the longest an accepted audit record waits before its batch is
            written.
        wait_for_write: an audited call answers only once its records are written, so a
            ``kill -9`` loses none of a completed call's records.
        config_poll_s: how often the host looks for publications made by other hosts
            sharing ``database`` (one is served within this plus one sync).
        audit_forward_s: how often a serving host forwards the audit records held in the
            configuration store's outbox (one held while the audit sink was failing reaches
            it within this once the sink takes records again).
    """

    database: str | None = None
    config_schema: str = DEFAULT_STATE_SCHEMAS["config_schema"]
    secrets_schema: str = DEFAULT_STATE_SCHEMAS["secrets_schema"]
    audit_schema: str = DEFAULT_STATE_SCHEMAS["audit_schema"]
    apply_schemas: bool = True
    keyring_file: Path | None = None
    keyring_env: str | None = None
    generate_keyring: bool = False
    audit_kind: str = "logging"
    audit_path: Path | None = None
    flush_interval_ms: int = 100
    wait_for_write: bool = True
    config_poll_s: float = DEFAULT_POLL_S
    audit_forward_s: float = DEFAULT_AUDIT_FORWARD_S

    @property
    def on_postgres(self) -> bool:
        """Whether ``database`` is a PostgreSQL connection template."""
        return self.database is not None and self.database.startswith(_POSTGRES_SCHEMES)


@attrs.frozen
class HostSettings:
    """Everything ``esra serve --config`` composes the host from."""

    issuers: tuple[TrustedIssuer, ...]
    tenants: tuple[TenantSettings, ...]
    server: ServerSettings = attrs.field(factory=ServerSettings)
    keyring: Keyring | None = attrs.field(default=None, repr=False)
    model: ModelSettings = attrs.field(factory=ModelSettings)
    state: StateSettings = attrs.field(factory=StateSettings)
    # ``[store]``: the settings of every tenant's document store until an operator
    # configures its own (``PUT /admin/v1/store/settings``), which then wins.
    store: ConfigurableSettings = attrs.field(factory=ConfigurableSettings)
    # ``[telemetry]``: export traces and metrics over OTLP (None: the spans stay no-ops).
    telemetry: TelemetrySettings | None = None
    # ``[redis]``: the cache, quotas and breakers several host processes share (None: each
    # process keeps its own).
    redis: RedisSettings | None = None


def database_path(databases: Path, source: Source) -> Path:
    """The SQLite file of ``source``: its ``connection_ref`` inside ``databases``."""
    return (databases / source.connection_ref).resolve()


class _Table:
    """A TOML table being read: typed getters that name the key, and unknown-key checks."""

    def __init__(self, data: Mapping[str, Any], path: str) -> None:
        self._data = data
        self._path = path
        self._read: set[str] = set()

    def key(self, name: str) -> str:
        return f"{self._path}.{name}" if self._path else name

    def fail(self, name: str, problem: str) -> SettingsError:
        return SettingsError(f"{self.key(name)}: {problem}")

    def has(self, name: str) -> bool:
        return name in self._data

    def names(self) -> list[str]:
        return list(self._data)

    def raw(self, name: str) -> Any:
        self._read.add(name)
        return self._data.get(name)

    def string(self, name: str, default: str | None = None) -> str | None:
        value = self.raw(name)
        if value is None:
            return default
        if not isinstance(value, str) or not value:
            raise self.fail(name, "must be a non-empty string")
        return value

    def required_string(self, name: str) -> str:
        value = self.string(name)
        if value is None:
            raise self.fail(name, "is required")
        return value

    def strings(self, name: str, *, single_allowed: bool = False) -> tuple[str, ...] | None:
        value = self.raw(name)
        if value is None:
            return None
        if single_allowed and isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self.fail(name, "must be a list of non-empty strings")
        return tuple(value)

    def number(self, name: str, default: float, *, low: float, high: float) -> float:
        value = self.raw(name)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(name, "must be a number")
        if not low <= value <= high:
            raise self.fail(name, f"must be between {low:g} and {high:g}")
        return float(value)

    def table(self, name: str) -> _Table:
        value = self.raw(name)
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise self.fail(name, "must be a table")
        return _Table(value, self.key(name))

    def tables(self, name: str) -> list[_Table]:
        value = self.raw(name)
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise self.fail(name, f"must be an array of tables ([[{name}]])")
        return [_Table(item, f"{self.key(name)}[{i}]") for i, item in enumerate(value)]

    def done(self) -> None:
        unknown = sorted(set(self._data) - self._read)
        if unknown:
            raise self.fail(unknown[0], "unknown key")


def _file(table: _Table, name: str, base: Path) -> Path | None:
    value = table.string(name)
    if value is None:
        return None
    path = (base / value).resolve()
    if not path.is_file():
        raise table.fail(name, f"no such file: {path}")
    return path


def _json_file(table: _Table, name: str, path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:  # "[[[…" nests past the decoder
        raise table.fail(name, f"cannot read {path} as JSON ({exc})") from exc


def _server(server: _Table, fetch: _Table) -> ServerSettings:
    settings = ServerSettings(
        resource_url=server.string("resource_url"),
        allowed_hosts=server.strings("allowed_hosts"),
        allowed_origins=server.strings("allowed_origins") or (),
        resource_name=server.string("resource_name", "ESRA enterprise search") or "",
        hourly_fetch_chars=int(
            fetch.number("hourly_chars", DEFAULT_HOURLY_FETCH_CHARS, low=1, high=1e9)
        ),
        document_ref_ttl_s=fetch.number(
            "document_ref_ttl_s", DEFAULT_REF_TTL_S, low=1, high=7 * 24 * 3600
        ),
        # A probe slower than a minute would hold every invocation that long; a health
        # answer older than an hour would keep a dead source in (or a revived one out).
        health_probe_timeout_s=server.number(
            "source_health_timeout_s", HEALTH_PROBE_TIMEOUT_S, low=0.1, high=60
        ),
        health_ttl_s=server.number("source_health_ttl_s", HEALTH_TTL_S, low=0.1, high=3600),
    )
    url = settings.resource_url
    if url is not None and not url.startswith(("http://", "https://")):
        raise server.fail("resource_url", "must be an absolute http(s) URL")
    server.done()
    return settings


def _keyring(fetch: _Table, base: Path) -> Keyring | None:
    path = _file(fetch, "keys_file", base)
    fetch.done()
    if path is None:
        return None
    document = _json_file(fetch, "keys_file", path)
    if not isinstance(document, dict) or set(document) != {"current", "keys"}:
        raise fetch.fail("keys_file", 'must hold {"current": "<key id>", "keys": {...}}')
    keys: dict[str, bytes] = {}
    if not isinstance(document["keys"], dict):
        raise fetch.fail("keys_file", '"keys" must map key ids to base64url keys')
    for key_id, encoded in document["keys"].items():
        try:
            material = base64.urlsafe_b64decode(str(encoded) + "=" * (-len(str(encoded)) % 4))
        except (binascii.Error, ValueError) as exc:
            raise fetch.fail("keys_file", f"key {key_id!r} is not base64url") from exc
        if len(material) != KEY_BYTES:
            raise fetch.fail("keys_file", f"key {key_id!r} must be {KEY_BYTES} bytes")
        keys[key_id] = material
    try:
        return Keyring(keys, current=str(document["current"]))
    except ValueError as exc:
        raise fetch.fail("keys_file", str(exc)) from exc


def _url(table: _Table, name: str, default: str | None = None) -> str | None:
    value = table.string(name, default)
    if value is None:
        return None
    try:
        parts = urlsplit(value)
        host = parts.hostname
    except ValueError:  # "http://[::1": an unbalanced or invalid bracketed host
        raise table.fail(name, "must be an absolute http(s) URL") from None
    if parts.scheme not in ("http", "https") or not host or not value.isprintable() or " " in value:
        raise table.fail(name, "must be an absolute http(s) URL")
    # A credential in a URL would be shown wherever the URL is; a query would be dropped.
    if parts.username or parts.password or parts.query or parts.fragment:
        raise table.fail(name, "must not carry credentials, a query or a fragment")
    return value


def _model_url(
    table: _Table, name: str, *, allow_insecure_http: bool, default: str | None = None
) -> str | None:
    """``_url``, and plain http only to loopback unless ``allow_insecure_http``: the model
    clients' own rule (``esra.llm.is_loopback_url``), so the host fails at start-up, naming
    the key, rather than when it builds the client. The URL is not quoted."""
    value = _url(table, name, default)
    if (
        value is not None
        and urlsplit(value).scheme == "http"
        and not allow_insecure_http
        and not is_loopback_url(value)
    ):
        raise table.fail(
            name,
            "must use https: plain http would send the key and the prompts in cleartext, and "
            "is allowed only to a loopback host (127.0.0.0/8, ::1, localhost) unless "
            "allow_insecure_http = true",
        )
    return value


def _boolean(table: _Table, name: str, default: bool) -> bool:
    value = table.raw(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise table.fail(name, "must be true or false")
    return value


def _integer(table: _Table, name: str, default: int, *, low: int, high: int) -> int:
    value = table.raw(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise table.fail(name, "must be an integer")
    if not low <= value <= high:
        raise table.fail(name, f"must be between {low} and {high}")
    return value


def _required(table: _Table, name: str, kind: str) -> str:
    value = table.string(name)
    if value is None:
        raise table.fail(name, f"is required for kind {kind!r}")
    return value


def _api_key_env(table: _Table, kind: str, *, optional: bool) -> str | None:
    if table.has("api_key"):
        raise table.fail(
            "api_key", "keys never go in the settings; name an environment variable in api_key_env"
        )
    name = table.raw("api_key_env")
    if name is None:
        if optional:
            return None
        raise table.fail("api_key_env", f"is required for kind {kind!r}")
    if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
        raise table.fail(
            "api_key_env",
            "must be the NAME of the environment variable holding the key (letters, digits "
            "and underscores), never the key itself",
        )
    return name


def _local_model(table: _Table, base: Path) -> ModelSettings:
    embeddings = table.raw("embeddings")
    if embeddings is not None and not isinstance(embeddings, bool):
        raise table.fail("embeddings", "must be true or false")
    for name in ("embeddings_cache", "embeddings_cache_entries"):
        if table.has(name) and not embeddings:
            raise table.fail(name, "needs embeddings = true")
    cache: Path | None = None
    value = table.string("embeddings_cache")
    if value is not None:
        cache = (base / value).resolve()
        if cache.is_dir():
            raise table.fail("embeddings_cache", f"is a directory, not a file: {cache}")
        if not cache.parent.is_dir():
            raise table.fail("embeddings_cache", f"no such directory: {cache.parent}")
    entries = _integer(
        table, "embeddings_cache_entries", DEFAULT_MAX_ENTRIES, low=1, high=100_000_000
    )
    table.done()
    return ModelSettings(
        embeddings=bool(embeddings), embeddings_cache=cache, embeddings_cache_entries=entries
    )


def _model(table: _Table, environ: Mapping[str, str] | None, base: Path) -> ModelSettings:
    kind = table.string("kind", "local") or "local"
    if kind not in MODEL_KINDS:
        raise table.fail("kind", f"must be one of {', '.join(sorted(MODEL_KINDS))}")
    for name in sorted(_ALL_MODEL_KEYS - _MODEL_KEYS[kind]):
        if table.has(name):
            raise table.fail(name, f"is not a setting of kind {kind!r}")
    if kind == "local":
        return _local_model(table, base)
    insecure = _boolean(table, "allow_insecure_http", False)
    common: dict[str, Any] = {
        "kind": kind,
        "timeout_s": table.number("timeout_s", 10.0, low=0.1, high=600),
        "max_retries": _integer(table, "max_retries", 2, low=0, high=10),
        "api_key_env": _api_key_env(table, kind, optional=kind == "openai"),
        "allow_insecure_http": insecure,
    }
    if kind == "openai":
        base_url = _model_url(table, "base_url", allow_insecure_http=insecure)
        if base_url is None:
            raise table.fail("base_url", "is required for kind 'openai' (the API root, …/v1)")
        settings = ModelSettings(base_url=base_url, model=_required(table, "model", kind), **common)
    elif kind == "azure-openai":
        endpoint = _model_url(table, "endpoint", allow_insecure_http=insecure)
        if endpoint is None:
            raise table.fail("endpoint", "is required for kind 'azure-openai'")
        settings = ModelSettings(
            endpoint=endpoint,
            deployment=_required(table, "deployment", kind),
            api_version=_required(table, "api_version", kind),
            **common,
        )
    else:
        settings = ModelSettings(
            model=_required(table, "model", kind),
            base_url=_model_url(
                table, "base_url", allow_insecure_http=insecure, default=ANTHROPIC_BASE_URL
            ),
            max_tokens=_integer(table, "max_tokens", 4096, low=1, high=1_000_000),
            **common,
        )
    table.done()
    if environ is not None:
        settings.api_key(environ)  # a missing key fails at start-up, not at the first search
    return settings


def _issuer(table: _Table, base: Path) -> TrustedIssuer:
    issuer = table.required_string("issuer")
    if issuer == DEV_ISSUER:
        raise table.fail("issuer", "the development issuer exists only in the embedded default")
    audiences = table.strings("audience", single_allowed=True)
    if audiences is None:
        raise table.fail("audience", "is required (a string or a list of strings)")
    if table.has("jwks") == table.has("jwks_file"):
        raise table.fail("jwks", "give exactly one of jwks and jwks_file")
    jwks_path = _file(table, "jwks_file", base)
    jwks = _json_file(table, "jwks_file", jwks_path) if jwks_path else table.raw("jwks")
    if not isinstance(jwks, dict):
        raise table.fail("jwks_file" if jwks_path else "jwks", "must be a JWK Set object")
    try:
        trusted = TrustedIssuer.build(
            issuer=issuer,
            audiences=audiences,
            jwks=jwks,
            algorithms=table.strings("algorithms") or ("RS256",),
            tenant_claim=table.string("tenant_claim", DEFAULT_TENANT_CLAIM) or "",
            client_claims=table.strings("client_claims") or DEFAULT_CLIENT_CLAIMS,
            leeway_s=table.number("leeway_s", DEFAULT_LEEWAY_S, low=0, high=300),
            tenants=table.strings("tenants"),
            advertised=_boolean(table, "advertised", True),
        )
    except IssuerError as exc:
        names = {"audiences": "audience", "jwks": "jwks_file" if jwks_path else "jwks"}
        raise table.fail(names.get(exc.setting, exc.setting), exc.problem) from exc
    table.done()
    return trusted


def _outbound_hosts(table: _Table) -> tuple[str, ...]:
    hosts = table.strings("outbound_hosts") or ()
    for each in hosts:
        try:
            parse_host_port(each)
        except ConfigurationError as exc:
            raise table.fail("outbound_hosts", str(exc)) from exc
    return hosts


def _secret_policy(table: _Table) -> ReferencePolicy:
    if not table.has("secrets"):
        return DENY_ALL
    secrets = table.table("secrets")
    private = secrets.raw("private_files_only")
    if private is not None and not isinstance(private, bool):
        raise secrets.fail("private_files_only", "must be true or false")
    names = {
        "env_names": secrets.strings("env_names") or (),
        "env_prefixes": secrets.strings("env_prefixes") or (),
        "directories": secrets.strings("directories") or (),
    }
    secrets.done()
    try:
        return ReferencePolicy(**names, private_files_only=private is not False)
    except ConfigurationError as exc:
        raise table.fail("secrets", str(exc)) from exc


def _source_options(table: _Table, snapshot: ConfigSnapshot) -> dict[str, dict[str, object]]:
    sources = table.table("sources")
    known = {source.id for source in snapshot.sources}
    options: dict[str, dict[str, object]] = {}
    for source_id in sorted(known):
        if sources.has(source_id):
            values = sources.table(source_id)
            options[source_id] = {name: values.raw(name) for name in values.names()}
            values.done()
    unknown = sorted(set(sources.names()) - known)
    if unknown:
        raise sources.fail(unknown[0], "no source of the tenant's configuration has this id")
    sources.done()
    return options


def _check_template(table: _Table, source: Source) -> None:
    """A connection template's password is a secret reference, never the secret."""
    try:
        check_no_literal_password(source)
    except ConfigurationError as exc:
        raise table.fail("config", str(exc)) from exc


def _check_sources(
    table: _Table,
    snapshot: ConfigSnapshot,
    databases: Path,
    kinds: frozenset[str],
    store_kinds: frozenset[str],
) -> None:
    if sum(s.provider_kind in store_kinds for s in snapshot.sources) > 1:
        raise table.fail("config", "a tenant has at most one document-store source")
    for source in snapshot.sources:
        if source.provider_kind not in kinds:
            shown = ", ".join(sorted(kinds)) or "none"
            raise table.fail(
                "config",
                f"source {source.id!r} has provider kind {source.provider_kind!r}, which no "
                f"installed distribution opens (installed kinds: {shown}); install the "
                "adapter distribution for it (esra-postgres, esra-mysql, ...)",
            )
        if source.provider_kind not in FILE_PROVIDER_KINDS:
            # A server store's template too: its host is checked against the tenant's
            # outbound hosts when it resolves, like any server source's.
            _check_template(table, source)
            continue
        path = database_path(databases, source)
        # A document store's file appears when an administrator initialises the store.
        exists = path.is_file() or source.provider_kind in store_kinds
        if not path.is_relative_to(databases) or not exists:
            raise table.fail(
                "databases", f"source {source.id!r}: no SQLite database {source.connection_ref!r}"
            )


def _state_database(state: _Table, base: Path) -> str | None:
    database = state.string("database")
    if database is None:
        return None
    if database.startswith(_POSTGRES_SCHEMES):
        try:
            parts = urlsplit(encode_placeholders(database))
        except ValueError as exc:
            raise state.fail("database", "is not a PostgreSQL connection URL") from exc
        if not parts.hostname:
            raise state.fail("database", "must name the PostgreSQL server's host")
        # The sources' own check: the state database's URL is a connection template too.
        if holds_literal_password(database):
            raise state.fail(
                "database",
                "holds a literal password; name it instead (${secret:env:NAME} or "
                "${secret:file:/path})",
            )
        return database
    if "://" in database:
        raise state.fail("database", "must be an SQLite file or a postgresql:// URL")
    path = (base / database).resolve()
    if path.is_dir():
        raise state.fail("database", f"is a directory, not a file: {path}")
    if not path.parent.is_dir():
        raise state.fail("database", f"no such directory: {path.parent}")
    return str(path)


def _schema_name(state: _Table, name: str) -> str:
    value = state.string(name, DEFAULT_STATE_SCHEMAS[name]) or DEFAULT_STATE_SCHEMAS[name]
    if not _SCHEMA_NAME.fullmatch(value):
        raise state.fail(name, "must be a plain lowercase identifier (letters, digits, _)")
    return value


def _keyring_source(secrets: _Table, base: Path) -> tuple[Path | None, str | None]:
    if secrets.has("keyring_file") and secrets.has("keyring_env"):
        raise secrets.fail("keyring_file", "give at most one of keyring_file and keyring_env")
    path = _file(secrets, "keyring_file", base)
    variable = secrets.string("keyring_env")
    if variable is not None and not _ENV_NAME.fullmatch(variable):
        raise secrets.fail(
            "keyring_env",
            "must be the NAME of the environment variable holding the keyring, never the keyring",
        )
    secrets.done()
    return path, variable


def _audit(audit: _Table, base: Path, *, database: str | None) -> dict[str, Any]:
    kind = audit.string("kind", "database" if database is not None else "logging")
    if kind not in AUDIT_KINDS:
        raise audit.fail("kind", f"must be one of {', '.join(sorted(AUDIT_KINDS))}")
    if kind == "database" and database is None:
        raise audit.fail("kind", '"database" needs [state] database')
    path: Path | None = None
    value = audit.string("path")
    if kind == "jsonl":
        if value is None:
            raise audit.fail("path", 'is required for kind "jsonl"')
        path = (base / value).resolve()
        if not path.parent.is_dir():
            raise audit.fail("path", f"no such directory: {path.parent}")
    elif value is not None:
        raise audit.fail("path", 'is a setting of kind "jsonl" only')
    wait = audit.raw("wait_for_write")
    if wait is not None and not isinstance(wait, bool):
        raise audit.fail("wait_for_write", "must be true or false")
    settings = {
        "audit_kind": kind,
        "audit_path": path,
        "flush_interval_ms": _integer(audit, "flush_interval_ms", 100, low=1, high=10_000),
        "wait_for_write": wait is not False,
    }
    audit.done()
    return settings


def _state(root: _Table, base: Path) -> StateSettings:
    state = root.table("state")
    database = _state_database(state, base)
    schemas = {name: _schema_name(state, name) for name in DEFAULT_STATE_SCHEMAS}
    apply_schemas = state.raw("apply_schemas")
    if apply_schemas is not None and not isinstance(apply_schemas, bool):
        raise state.fail("apply_schemas", "must be true or false")
    config_poll_s = state.number("config_poll_s", DEFAULT_POLL_S, low=0.1, high=3600)
    audit_forward_s = state.number("audit_forward_s", DEFAULT_AUDIT_FORWARD_S, low=0.1, high=3600)
    state.done()
    secrets = root.table("secrets")
    keyring_file, keyring_env = _keyring_source(secrets, base)
    if database is not None and keyring_file is None and keyring_env is None:
        raise secrets.fail(
            "keyring_file",
            "is required with [state] database (or keyring_env): the key-encryption keyring "
            "that protects the stored secrets",
        )
    if database is None and (keyring_file is not None or keyring_env is not None):
        raise state.fail("database", "is required where [secrets] names a keyring")
    audit = _audit(root.table("audit"), base, database=database)
    return StateSettings(
        database=database,
        config_schema=schemas["config_schema"],
        secrets_schema=schemas["secrets_schema"],
        audit_schema=schemas["audit_schema"],
        apply_schemas=apply_schemas is not False,
        config_poll_s=config_poll_s,
        audit_forward_s=audit_forward_s,
        keyring_file=keyring_file,
        keyring_env=keyring_env,
        **audit,
    )


def _tenant(
    table: _Table, base: Path, kinds: frozenset[str], store_kinds: frozenset[str]
) -> TenantSettings:
    tenant_id = table.required_string("id")
    config_path = _file(table, "config", base)
    if config_path is None:
        raise table.fail("config", "is required (the tenant's configuration document, JSON)")
    try:
        snapshot = load_snapshot(_json_file(table, "config", config_path))
    except ConfigurationError as exc:
        raise table.fail("config", str(exc)) from exc
    if snapshot.tenant_id != tenant_id:
        raise table.fail("config", f"the document configures tenant {snapshot.tenant_id!r}")
    databases = (base / (table.string("databases", ".") or ".")).resolve()
    if not databases.is_dir():
        raise table.fail("databases", f"no such directory: {databases}")
    _check_sources(table, snapshot, databases, kinds, store_kinds)
    tenant = TenantSettings(
        snapshot=snapshot,
        databases=databases,
        outbound_hosts=_outbound_hosts(table),
        secret_policy=_secret_policy(table),
        source_options=_source_options(table, snapshot),
    )
    table.done()
    return tenant


def parse_settings(
    data: Mapping[str, Any],
    *,
    base: Path,
    environ: Mapping[str, str] | None = None,
    model_key: bool = True,
    provider_kinds: frozenset[str] | None = None,
    store_kinds: frozenset[str] | None = None,
) -> HostSettings:
    """Validate parsed TOML ``data``; relative paths are taken from ``base``.

    Args:
        data: the parsed TOML.
        base: the directory relative paths are taken from.
        environ: where the model's ``api_key_env`` is looked up (default: the process
            environment, read now).
        model_key: check that the model's key variable is set; commands that never call
            the model (``esra worker``, ``esra ingest``) skip the check.
        provider_kinds: the provider kinds sources may have (default: those the installed
            distributions register under the ``esra.providers`` entry points).
        store_kinds: the provider kinds that are document stores, at most one per tenant
            (default: those registered under the ``esra.document_stores`` entry points).

    Raises:
        SettingsError: the first problem found, naming its key.
    """
    root = _Table(data, "")
    fetch = root.table("fetch")
    server = _server(root.table("server"), fetch)
    keyring = _keyring(fetch, base)
    environment = (os.environ if environ is None else environ) if model_key else None
    model = _model(root.table("model"), environment, base)
    issuers = tuple(_issuer(t, base) for t in root.tables("issuers"))
    if not issuers:
        raise root.fail("issuers", "at least one [[issuers]] table is required")
    seen = [i.issuer for i in issuers]
    if len(seen) != len(set(seen)):
        raise root.fail("issuers", "the same issuer is configured twice")
    kinds = installed_provider_kinds() if provider_kinds is None else provider_kinds
    stores = installed_store_kinds() if store_kinds is None else store_kinds
    tenants = tuple(_tenant(t, base, kinds, stores) for t in root.tables("tenants"))
    if not tenants:
        raise root.fail("tenants", "at least one [[tenants]] table is required")
    ids = [t.id for t in tenants]
    if len(ids) != len(set(ids)):
        raise root.fail("tenants", "the same tenant id is configured twice")
    state = _state(root, base)
    store = _store(root.table("store"))
    telemetry = _telemetry(root.table("telemetry"))
    redis = _redis(root.table("redis"))
    root.done()
    return HostSettings(
        issuers=issuers,
        tenants=tenants,
        server=server,
        keyring=keyring,
        model=model,
        state=state,
        store=store,
        telemetry=telemetry,
        redis=redis,
    )


_REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEY_PREFIX = re.compile(r"[A-Za-z0-9_.:-]{1,64}")


def _carries_credentials(url: str) -> bool:
    """Whether ``url`` holds a password or a credential-named query value (a reference
    included: only connection templates resolve ``${secret:…}``)."""
    try:
        password = urlsplit(url).password
    except ValueError:
        return True
    return bool(password) or holds_literal_password(url) or "${secret:" in url


def _redis(table: _Table) -> RedisSettings | None:
    """``[redis]``: url or url_env (one of them), cache, quota, breakers, key_prefix,
    max_connections."""
    if not table.names():
        table.done()
        return None
    url = table.string("url")
    url_env = table.string("url_env")
    if (url is None) == (url_env is None):
        raise table.fail("url", "give exactly one of url and url_env")
    if url is not None and not url.startswith(_REDIS_SCHEMES):
        raise table.fail("url", "must start with redis://, rediss:// or unix://")
    if url is not None and _carries_credentials(url):
        # As for [state] database: the settings file is configuration, read, copied and
        # versioned as such; a secret in it is a secret in every copy.
        raise table.fail("url", "holds a literal password; give the whole URL in url_env instead")
    if url_env is not None and not _ENV_NAME.fullmatch(url_env):
        raise table.fail("url_env", "must be an environment variable name")
    flags = {}
    for name in ("cache", "quota", "breakers"):
        value = table.raw(name)
        if value is not None and not isinstance(value, bool):
            raise table.fail(name, "must be true or false")
        flags[name] = True if value is None else value
    prefix = table.string("key_prefix", DEFAULT_REDIS_PREFIX) or DEFAULT_REDIS_PREFIX
    if not _KEY_PREFIX.fullmatch(prefix):
        raise table.fail("key_prefix", "1 to 64 of letters, digits and _ . : -")
    connections = table.number("max_connections", DEFAULT_REDIS_CONNECTIONS, low=2, high=1024)
    if connections != int(connections):
        raise table.fail("max_connections", "must be a whole number")
    settings = RedisSettings(
        url=url,
        url_env=url_env,
        cache=flags["cache"],
        quota=flags["quota"],
        breakers=flags["breakers"],
        key_prefix=prefix,
        max_connections=int(connections),
    )
    table.done()
    return settings


def _telemetry(table: _Table) -> TelemetrySettings | None:
    """``[telemetry]``: otlp_endpoint (required to export), service_name, traces, metrics,
    metrics_interval_s, sample_ratio."""
    if not table.names():
        table.done()
        return None
    endpoint = table.string("otlp_endpoint")
    if endpoint is None or not endpoint.startswith(("http://", "https://")):
        raise table.fail("otlp_endpoint", "must be the collector's http(s) URL (OTLP/HTTP)")
    if _carries_credentials(endpoint):
        raise table.fail(
            "otlp_endpoint",
            "must not carry credentials; give them in OTEL_EXPORTER_OTLP_HEADERS instead",
        )
    flags = {}
    for name in ("traces", "metrics"):
        value = table.raw(name)
        if value is not None and not isinstance(value, bool):
            raise table.fail(name, "must be true or false")
        flags[name] = True if value is None else value
    settings = TelemetrySettings(
        otlp_endpoint=endpoint,
        service_name=table.string("service_name", "esra") or "esra",
        traces=flags["traces"],
        metrics=flags["metrics"],
        metrics_interval_s=table.number("metrics_interval_s", 60.0, low=1, high=3600),
        sample_ratio=table.number("sample_ratio", 1.0, low=0, high=1),
    )
    table.done()
    return settings


def _store(store: _Table) -> ConfigurableSettings:
    """``[store]``: scan_policy, retain_bytes, max_attempts, batch_per_tenant (defaults)."""
    defaults = ConfigurableSettings()
    values: dict[str, object] = {}
    for name in ("scan_policy", "retain_bytes", "max_attempts", "batch_per_tenant"):
        if store.has(name):
            values[name] = store.raw(name)
    store.done()
    try:
        return defaults.changed(values)
    except StoreSettingsError as exc:
        raise store.fail(exc.parameter, _store_problem(exc.parameter)) from None


def _store_problem(name: str) -> str:
    problems = {
        "scan_policy": "must be one of quarantine, reject, index_anyway",
        "retain_bytes": "must be true or false",
        "max_attempts": f"must be a whole number from 1 to {MAX_ATTEMPTS_CEILING}",
        "batch_per_tenant": f"must be a whole number from 1 to {MAX_BATCH_CEILING}",
    }
    return problems[name]


def load_settings(
    path: Path, *, environ: Mapping[str, str] | None = None, model_key: bool = True
) -> HostSettings:
    """Read and validate the TOML file at ``path`` (``environ``, ``model_key``: see
    :func:`parse_settings`).

    Raises:
        SettingsError: the file cannot be read or a setting is unusable.
    """
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SettingsError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SettingsError(f"{path} is not valid TOML: {exc}") from exc
    return parse_settings(data, base=path.resolve().parent, environ=environ, model_key=model_key)
