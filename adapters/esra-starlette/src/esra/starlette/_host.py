"""The parts ``esra serve`` composes, from TOML settings, and how they become the ASGI app.

``open_configured`` turns validated :class:`HostSettings` into running parts through the one
composition root, ``esra.starlette._bootstrap`` (a provider per source, of any installed
engine, closed again on exit); ``esra.starlette._embedded`` does the same for the embedded
default. ``build_app`` hands either to :func:`create_app`.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Mapping

import attrs
from starlette.applications import Starlette

from esra.core import Executor, StaticConfigRepository
from esra.core.admin import ConfigPublisher, ModelProfile, WorkspaceStore
from esra.core.audit import AuditReader, LoggingAuditSink
from esra.core.config import Source
from esra.core.docstore import ConfigurableSettings, StoreStateTable, installed_store_kinds
from esra.core.fetch import Keyring
from esra.core.ports import (
    AuditSink,
    Cache,
    ConfigRepository,
    LanguageModel,
    QuotaStore,
    SearchProvider,
    WritableSecretStore,
)
from esra.llm import AnthropicMessagesModel, LocalModel, OpenAIChatModel
from esra.starlette._app import MCP_PATH, create_app
from esra.starlette._issuers import TrustedIssuer
from esra.starlette._settings import (
    ANTHROPIC_BASE_URL,
    HostSettings,
    ModelSettings,
    ServerSettings,
    SettingsError,
)
from esra.starlette._stores import StoreSpec, TenantStore

__all__ = [
    "HostParts",
    "build_app",
    "default_resource_url",
    "open_model",
    "store_sources",
]


@attrs.frozen
class HostParts:
    """Everything the host needs besides where it listens."""

    config: ConfigRepository
    # Per tenant, each source's provider by source id, of whatever engine.
    providers: Mapping[str, Mapping[str, SearchProvider]]
    issuers: tuple[TrustedIssuer, ...]
    keyring: Keyring = attrs.field(repr=False)
    model: LanguageModel
    server: ServerSettings = attrs.field(factory=ServerSettings)
    # Per tenant, its internal document store, of any registered kind (tenants without a
    # store are absent): what the admin API, ``esra worker`` and ``esra ingest`` open
    # through the ``DocumentStoreRegistry``.
    stores: Mapping[str, StoreSpec] = attrs.field(factory=dict)
    # What a store runs on until its tenant configures it (the settings' ``[store]``).
    store_defaults: ConfigurableSettings = attrs.field(factory=ConfigurableSettings)
    # Where audit records go: the ``esra.audit`` logger unless the process composed another.
    audit: AuditSink = attrs.field(factory=LoggingAuditSink)
    # The process's one executor, shared by every tenant (``create_app`` makes one if absent).
    executor: Executor | None = None
    # Receives what the admin API publishes; without one, ``config`` itself when it is a
    # ``StaticConfigRepository`` (else the configuration endpoints are not served).
    publisher: ConfigPublisher | None = None
    # Where the admin API keeps drafts and their history (``None``: in its memory).
    workspaces: WorkspaceStore | None = None
    # Where the host processes on one state database share their document stores' lifecycle
    # state (``None``: each process keeps its own).
    store_states: StoreStateTable | None = None
    # Where the admin API writes connection secrets (``None``: in its memory).
    secrets: WritableSecretStore | None = attrs.field(default=None, repr=False)
    # Reads audit records back for ``GET /admin/v1/audit`` (``None``: that endpoint is 404).
    audit_reader: AuditReader | None = None
    # The models ``GET /admin/v1/lookups`` names (empty: ``model`` as profile ``default``).
    model_profiles: tuple[ModelProfile, ...] = ()
    # ``[redis]``: the selection/result cache and the fetch quota shared by several host
    # processes (``None``: no cache, and the quota in this process's memory).
    cache: Cache | None = None
    quota: QuotaStore | None = None
    # How often a serving host forwards the audit records held in its document stores'
    # outboxes (``[state] audit_forward_s``; ``None``: at start and after each action only).
    audit_forward_s: float | None = None


def default_resource_url(host: str, port: int) -> str:
    """The MCP endpoint's URL on the bound address (IPv6 literals bracketed)."""
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{MCP_PATH}"


def store_sources(
    settings: HostSettings, *, store_kinds: frozenset[str] | None = None
) -> dict[str, Source]:
    """Per configured tenant, its document-store source, if it has one (at most one: the
    settings refuse more).

    ``store_kinds``: the provider kinds that are document stores (default: those registered
    under the ``esra.document_stores`` entry points).
    """
    kinds = installed_store_kinds() if store_kinds is None else store_kinds
    stores: dict[str, Source] = {}
    for tenant in settings.tenants:
        for source in tenant.snapshot.sources:
            if source.provider_kind in kinds:
                stores[tenant.id] = source
    return stores


def build_app(
    parts: HostParts,
    *,
    host: str,
    port: int,
    audit: AuditSink | None = None,
    stores: Mapping[str, TenantStore] | None = None,
) -> Starlette:
    """The host's ASGI app over ``parts``, listening on ``host``:``port``.

    Audit records go to ``parts.audit`` unless ``audit`` is given. ``stores`` are
    the tenants' opened document stores (``open_tenant_stores(parts.stores, ...)``). The admin
    API publishes into ``parts.publisher`` (or ``parts.config`` when it is a
    ``StaticConfigRepository``), keeps drafts in ``parts.workspaces``, writes secrets into
    ``parts.secrets`` and reads audit back through ``parts.audit_reader``.
    """
    server = parts.server
    config = parts.config
    publisher = parts.publisher
    if publisher is None and isinstance(config, StaticConfigRepository):
        publisher = config
    return create_app(
        config=parts.config,
        providers=parts.providers,
        model=parts.model,
        audit=audit or parts.audit,
        issuers=parts.issuers,
        resource_url=server.resource_url or default_resource_url(host, port),
        keyring=parts.keyring,
        hourly_fetch_chars=server.hourly_fetch_chars,
        document_ref_ttl_s=server.document_ref_ttl_s,
        health_probe_timeout_s=server.health_probe_timeout_s,
        health_ttl_s=server.health_ttl_s,
        bind_host=host,
        allowed_hosts=server.allowed_hosts,
        allowed_origins=server.allowed_origins,
        resource_name=server.resource_name,
        # A host whose public address is https is reached over TLS, though a terminating
        # proxy in front of it forwards plain http: its portal cookies are Secure.
        secure_cookies=True if (server.resource_url or "").startswith("https://") else None,
        document_stores=stores,
        publisher=publisher,
        workspaces=parts.workspaces,
        secrets=parts.secrets,
        audit_reader=parts.audit_reader,
        executor=parts.executor,
        model_profiles=parts.model_profiles or None,
        cache=parts.cache,
        quota=parts.quota,
    )


def open_model(settings: ModelSettings) -> LanguageModel:
    """The model client ``[model]`` describes; its key is read from the environment now.

    Raises:
        SettingsError: the key's environment variable is unset (named, never its value).
    """
    key = settings.api_key(os.environ)
    if settings.kind == "openai" and settings.base_url and settings.model:
        return OpenAIChatModel(
            settings.base_url,
            key,
            settings.model,
            timeout_s=settings.timeout_s,
            max_retries=settings.max_retries,
            allow_insecure_http=settings.allow_insecure_http,
        )
    if settings.kind == "azure-openai" and key and settings.endpoint and settings.deployment:
        return OpenAIChatModel.azure(
            settings.endpoint,
            settings.deployment,
            key,
            api_version=settings.api_version or "",
            timeout_s=settings.timeout_s,
            max_retries=settings.max_retries,
            allow_insecure_http=settings.allow_insecure_http,
        )
    if settings.kind == "anthropic" and key and settings.model:
        return AnthropicMessagesModel(
            key,
            settings.model,
            base_url=settings.base_url or ANTHROPIC_BASE_URL,
            max_tokens=settings.max_tokens,
            timeout_s=settings.timeout_s,
            max_retries=settings.max_retries,
            allow_insecure_http=settings.allow_insecure_http,
        )
    if settings.kind == "local":
        if not settings.embeddings:
            return LocalModel()
        try:
            return LocalModel.with_embeddings(
                cache_path=settings.embeddings_cache,
                cache_entries=settings.embeddings_cache_entries,
            )
        except ImportError as exc:
            msg = f"model.embeddings: {exc}"
            raise SettingsError(msg) from exc
        except (OSError, sqlite3.Error, ValueError) as exc:
            msg = f"model.embeddings_cache: cannot open {settings.embeddings_cache} ({exc})"
            raise SettingsError(msg) from exc
    # Unreachable through parse_settings, which requires each kind's keys.
    msg = f"model: incomplete settings for kind {settings.kind!r}"
    raise SettingsError(msg)
