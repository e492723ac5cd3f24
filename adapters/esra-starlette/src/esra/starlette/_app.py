"""create_app: the example host's ASGI application, composed from every port in one place.

Routes:

- ``/mcp`` — the MCP endpoint (streamable HTTP, stateless, JSON responses). The ``mcp``
  SDK's bearer middleware authenticates every request with :class:`JwtVerifier`; a missing,
  invalid or expired token, an unknown issuer or a refused algorithm gets 401 with
  ``WWW-Authenticate: Bearer error="invalid_token", …, resource_metadata="…"``.
- ``/.well-known/oauth-protected-resource/mcp`` — RFC 9728 protected-resource metadata: the
  resource URL, the trusted issuers as its authorization servers, bearer tokens in the header.
- ``/healthz`` — liveness, unauthenticated, naming nothing about any tenant.
- ``/readyz`` — readiness (``esra.starlette._readiness``): the state database, the document
  stores and the audit sink answer; unauthenticated, naming no tenant either.
- ``/admin/v1`` — the admin API (``esra.starlette._admin``): JSON, its OpenAPI document at
  ``/admin/v1/openapi.json``, the same bearer tokens, roles from one token claim.
- ``/portal/`` — the document store's server-rendered pages (``esra.starlette._portal``),
  signed in with the same tokens and roles as the admin API.

Stateless because ESRA keeps no conversation state (each invocation is independent): no
session outlives its request, so none can be reused with another caller's token, and any
instance behind a load balancer can answer any request. So ``/mcp`` serves POST only (one
JSON-RPC message in, one JSON answer out); see :class:`OneMessageExchange`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend, RequireAuthMiddleware
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from esra.core import DocumentFetcher, Executor, Retriever, SystemClock
from esra.core.admin import (
    ConfigPublisher,
    ExplainService,
    HostLookups,
    IssuerLookup,
    ModelProfile,
    WorkspaceStore,
)
from esra.core.audit import AuditReader, TraceLinkedAuditSink
from esra.core.fetch import DEFAULT_HOURLY_FETCH_CHARS, DEFAULT_REF_TTL_S, Keyring
from esra.core.hosting import HEALTH_PROBE_TIMEOUT_S, HEALTH_TTL_S, InProcessQuotaStore
from esra.core.ports import (
    AuditSink,
    Cache,
    Clock,
    ConfigRepository,
    LanguageModel,
    QuotaStore,
    SearchProvider,
    WritableSecretStore,
)
from esra.starlette._admin import (
    ADMIN_PATH,
    DEFAULT_CROSS_TENANT_ROLES_CLAIM,
    DEFAULT_ROLES_CLAIM,
    AdminLimits,
    admin_app,
)
from esra.starlette._admin.errors import handle_http
from esra.starlette._auth import JwtVerifier
from esra.starlette._host_check import HostHeaderCheck
from esra.starlette._issuers import TrustedIssuer
from esra.starlette._portal import portal_app
from esra.starlette._readiness import host_checks, readiness_endpoint
from esra.starlette._stores import TenantStore, ready_stores_config
from esra.starlette._tools import EsraTools, TenantServices

__all__ = ["LOOPBACK_HOSTS", "MCP_PATH", "PORTAL_PATH", "create_app", "metadata_path"]

_log = logging.getLogger(__name__)

MCP_PATH = "/mcp"
PORTAL_PATH = "/portal"
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
_WELL_KNOWN = "/.well-known/oauth-protected-resource"


def metadata_path(resource_url: str) -> str:
    """Where RFC 9728 (§3.1) puts the metadata of ``resource_url``: the well-known prefix
    before the resource's path."""
    path = urlsplit(resource_url).path.rstrip("/")
    return _WELL_KNOWN + path


# The id-less refusals of a body the transport could not take as one JSON-RPC message, in the
# 2026-07-28 entry's fixed words; keyed by the code the handshake-era entry uses.
_BODY_REFUSALS: dict[int, dict[str, object]] = {
    PARSE_ERROR: {"code": PARSE_ERROR, "message": "Parse error"},
    INVALID_PARAMS: {
        "code": INVALID_REQUEST,
        "message": "Body must be a single JSON-RPC request or notification object",
    },
}
_NOT_ONE_MESSAGE = JSONResponse(
    {"jsonrpc": "2.0", "id": None, "error": _BODY_REFUSALS[INVALID_PARAMS]}, status_code=400
)
_ONLY_POST = JSONResponse(
    {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": INVALID_REQUEST, "message": "Method Not Allowed: send POST"},
    },
    status_code=405,
    headers={"Allow": "POST"},
)


def _is_request(body: bytes) -> bool:
    """Whether ``body`` is a JSON-RPC request: a ``method`` and an ``id`` member, whatever
    its value. A notification has no ``id``; a client's answer to the server, no ``method``."""
    try:
        message = json.loads(body)
    except ValueError:
        return False
    return isinstance(message, dict) and "method" in message and "id" in message


def _fixed_refusal(body: bytes) -> bytes:
    """``body`` with a transport refusal's text replaced by fixed words (else unchanged)."""
    try:
        answer = json.loads(body)
    except ValueError:
        return body  # not JSON-RPC (e.g. the SDK's plain-text Content-Type refusal)
    if not isinstance(answer, dict) or answer.get("id") is not None:
        return body  # an answer to a request that was read: the server's own words
    error = answer.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    fixed = _BODY_REFUSALS.get(code) if isinstance(code, int) else None
    if fixed is None:
        return body
    return json.dumps({"jsonrpc": "2.0", "id": None, "error": fixed}).encode()


class OneMessageExchange:
    """The MCP endpoint as ESRA serves it: one POSTed JSON-RPC message, one JSON answer.

    In front of the ``mcp`` SDK's transport, for what its handshake-era entry (a request
    without a 2026-07-28 ``MCP-Protocol-Version``) would do otherwise:

    - every method but POST is 405 with ``Allow: POST``, as on the 2026-07-28 entry. A GET
      would open a server-to-client SSE stream that, stateless, nothing can ever write to,
      held until the client leaves (as many as a caller opens); with ``Last-Event-ID`` it
      would get no response at all.
    - a body it cannot take as one JSON-RPC message (a batch, no ``jsonrpc``, ``params`` a
      list, not JSON) is refused in the 2026-07-28 entry's fixed words rather than with the
      parser's or pydantic's text (library names and versions, a repr of the request).
    - a request whose ``id`` MCP does not allow (null, a float, a bool, an object) is refused
      in the same words, as the 2026-07-28 entry refuses it. The SDK took it for a
      notification: 202, nothing run, and the client waiting for an answer for ever. Only a
      202 is checked, so the body is parsed again only on that path, never for an answer.
    """

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        if scope["method"] != "POST":
            await _ONLY_POST(scope, receive, send)
            return
        refusal: Message | None = None
        accepted_request = False
        request_body: list[bytes] = []

        async def receive_kept() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                request_body.append(message.get("body", b""))
            return message

        async def send_fixed(message: Message) -> None:
            nonlocal refusal, accepted_request
            if message["type"] == "http.response.start":
                if message["status"] == 400:
                    refusal = message  # held until its body shows what it refuses
                    return
                if message["status"] == 202 and _is_request(b"".join(request_body)):
                    accepted_request = True  # taken for a notification: refused instead
                    await _NOT_ONE_MESSAGE(scope, _no_more_body, send)
                    return
            if accepted_request:
                return  # the 202's own body, replaced by the refusal already sent
            if refusal is None or message["type"] != "http.response.body":
                await send(message)
                return
            start, refusal = refusal, None
            if message.get("more_body", False):
                # Not one JSON document in one piece, as every refusal is: passed as it is.
                await send(start)
                await send(message)
                return
            body = _fixed_refusal(message.get("body", b""))
            headers = [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
            headers.append((b"content-length", str(len(body)).encode()))
            await send({**start, "headers": headers})
            await send({**message, "body": body})

        await self._app(scope, receive_kept, send_fixed)


async def _no_more_body() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}


def _transport_security(
    bind_host: str, allowed_hosts: Sequence[str] | None, allowed_origins: Sequence[str]
) -> TransportSecuritySettings | None:
    """DNS-rebinding protection: the configured hosts, else loopback when bound to loopback."""
    if allowed_hosts:
        return TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=list(allowed_hosts),
            allowed_origins=list(allowed_origins),
        )
    if bind_host in LOOPBACK_HOSTS:
        return TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=[
                "http://127.0.0.1:*",
                "http://localhost:*",
                "http://[::1]:*",
                *allowed_origins,
            ],
        )
    # Bound to a non-loopback address without a host list (behind a proxy that checks Host).
    return None


def _resource_metadata(
    resource_url: str, issuers: Sequence[TrustedIssuer], resource_name: str
) -> dict[str, Any]:
    """The RFC 9728 protected-resource metadata document of ``/mcp``."""
    # Issuer identifiers exactly as configured (RFC 8414 compares them as strings); the
    # member is optional (RFC 9728 section 2), so none advertised leaves it out.
    advertised = [issuer.issuer for issuer in issuers if issuer.advertised]
    metadata: dict[str, Any] = {"resource": resource_url}
    if advertised:
        metadata["authorization_servers"] = advertised
    metadata["bearer_methods_supported"] = ["header"]
    metadata["resource_name"] = resource_name
    return metadata


def create_app(
    *,
    config: ConfigRepository,
    providers: Mapping[str, Mapping[str, SearchProvider]],
    model: LanguageModel,
    audit: AuditSink,
    issuers: Sequence[TrustedIssuer],
    resource_url: str,
    keyring: Keyring | None = None,
    quota: QuotaStore | None = None,
    cache: Cache | None = None,
    clock: Clock | None = None,
    hourly_fetch_chars: int = DEFAULT_HOURLY_FETCH_CHARS,
    document_ref_ttl_s: float = DEFAULT_REF_TTL_S,
    health_probe_timeout_s: float = HEALTH_PROBE_TIMEOUT_S,
    health_ttl_s: float = HEALTH_TTL_S,
    bind_host: str = "127.0.0.1",
    allowed_hosts: Sequence[str] | None = None,
    allowed_origins: Sequence[str] = (),
    resource_name: str = "ESRA enterprise search",
    document_stores: Mapping[str, TenantStore] | None = None,
    publisher: ConfigPublisher | None = None,
    roles_claim: str = DEFAULT_ROLES_CLAIM,
    cross_tenant_roles_claim: str = DEFAULT_CROSS_TENANT_ROLES_CLAIM,
    admin_limits: AdminLimits | None = None,
    secure_cookies: bool | None = None,
    executor: Executor | None = None,
    workspaces: WorkspaceStore | None = None,
    secrets: WritableSecretStore | None = None,
    audit_reader: AuditReader | None = None,
    model_profiles: Sequence[ModelProfile] | None = None,
) -> Starlette:
    """Compose the host: one ``Retriever`` (and ``DocumentFetcher``) per tenant, behind MCP,
    all running their queries through one shared ``Executor``.

    Args:
        config: every tenant's configuration.
        providers: per tenant, the search provider of each source by source id. A tenant
            absent here has no tools; each tenant's pipeline sees only its own providers.
        model: the language model for selection, planning, reranking and answers.
        audit: where every audit record goes (``esra.invoke`` and the pipeline's).
        issuers: the trusted token issuers.
        resource_url: this endpoint's public URL (the RFC 9728 ``resource``), e.g.
            ``https://esra.example.com/mcp``.
        keyring: keys for ``documentRef``; without it no result carries one and no fetch
            tool is published.
        quota: per-caller hourly fetch budget (in-process by default: one instance only).
        cache: optional cache for selections and results.
        clock: time source for the pipeline, audit and token expiry.
        hourly_fetch_chars: each caller's fetch budget per hour.
        document_ref_ttl_s: how long a ``documentRef`` stays openable.
        health_probe_timeout_s: the longest a source's health check may take before the
            source counts as unavailable for the invocation.
        health_ttl_s: how long one health check's answer about a source is used.
        bind_host: the address the server listens on; loopback turns on DNS-rebinding
            protection for loopback Host headers (on every route but ``/healthz`` and
            ``/readyz``).
        allowed_hosts: Host header values (``host:port`` or ``host:*``) to accept; turns on
            DNS-rebinding protection for these hosts whatever ``bind_host`` is, on every
            route but ``/healthz`` and ``/readyz`` (a foreign Host gets 421).
        allowed_origins: Origin header values to accept from browsers.
        resource_name: the human-readable name in the protected-resource metadata.
        document_stores: each tenant's internal document store, opened by the caller (see
            ``esra.starlette._stores.open_tenant_stores``); served by the admin API, and
            searched and fetched from only while Ready (until then its source is left out
            of every invocation's scope, as a draft source is).
        publisher: receives snapshots the admin API publishes (usually ``config`` itself);
            without one the admin API's configuration endpoints are not served.
        roles_claim: the token claim holding an administrator's roles (on its own tenant).
        cross_tenant_roles_claim: the token claim holding an administrator's roles on every
            tenant its issuer is trusted for (the admin API's ``ESRA-Tenant`` header).
        admin_limits: request body limits of the admin API.
        secure_cookies: force the portal cookie's ``Secure`` flag (``True`` behind a proxy
            that terminates TLS); by default it is set for requests that arrived over https.
        executor: the process's one executor (its instance-wide concurrency bound, provider
            limiters and circuit breakers), shared by every tenant's searches and fetches;
            one is made on ``clock`` when absent — still one for all tenants, never one each.
        workspaces: where the admin API keeps drafts, their history and publications (in
            memory when absent; ``SqliteConfigStore`` / ``PostgresConfigStore`` keep them).
        secrets: where the admin API writes connection secrets — the store the providers
            resolve through, so a written secret is used (in memory when absent).
        audit_reader: reads audit records back for ``GET /admin/v1/audit`` (404 without).
        model_profiles: the models ``GET /admin/v1/lookups`` names (default: ``model`` as
            the profile ``default``, by its class).

    Raises:
        ValueError: two issuers share an ``iss``, ``resource_url`` is not an http(s) URL, or
            ``roles_claim`` and ``cross_tenant_roles_claim`` are blank, reserved or the same
            claim (``RoleClaims``).
    """
    parsed = urlsplit(resource_url)
    if parsed.scheme not in {"http", "https"} or not parsed.netloc:
        msg = "resource_url must be an absolute http(s) URL"
        raise ValueError(msg)
    verifier = JwtVerifier(issuers, clock=clock)
    readiness = host_checks(workspaces=workspaces, stores=document_stores or {}, audit=audit)
    # Every record written while a recorded span is current names its trace (a no-op until
    # the host installs an OpenTelemetry SDK): the audit trail and the traces find each other.
    audit = TraceLinkedAuditSink(audit)
    # Filled below as each tenant's pipeline is composed; the explain service keeps the map.
    retrievers: dict[str, Retriever] = {}
    explainer = ExplainService(
        retrievers,
        audit=audit,
        clock=clock or SystemClock(),
        # An explained caller's tenant claim must name the tenant explained, as a token's does.
        tenant_claims=frozenset(issuer.tenant_claim for issuer in issuers),
    )
    admin = admin_app(
        config=config,
        stores=document_stores or {},
        audit=audit,
        clock=clock or SystemClock(),
        publisher=publisher,
        secrets=secrets,
        workspaces=workspaces,
        roles_claim=roles_claim,
        cross_tenant_roles_claim=cross_tenant_roles_claim,
        limits=admin_limits,
        audit_reader=audit_reader,
        explainer=explainer,
        lookups=HostLookups(
            model_profiles=tuple(model_profiles)
            if model_profiles is not None
            else (ModelProfile(name="default", kind=type(model).__name__),),
            trusted_issuers=tuple(
                IssuerLookup(issuer.issuer, issuer.audiences, issuer.tenants) for issuer in issuers
            ),
        ),
    )
    quota = quota or InProcessQuotaStore(clock)
    # One per process: the spec's per-runtime-instance bound must not grow with the tenants.
    executor = executor or Executor(clock=clock or SystemClock())
    tenants: dict[str, TenantServices] = {}
    # What the pipeline searches and fetches from: a store is a source once it is Ready.
    searched = ready_stores_config(config, document_stores or {})
    for tenant_id, tenant_providers in providers.items():
        retriever = Retriever(
            config=searched,
            providers=tenant_providers,
            model=model,
            audit=audit,
            clock=clock,
            cache=cache,
            executor=executor,
            keyring=keyring,
            document_ref_ttl_s=document_ref_ttl_s,
            tenant_id=tenant_id,
            health_probe_timeout_s=health_probe_timeout_s,
            health_ttl_s=health_ttl_s,
        )
        fetcher = None
        if keyring is not None:
            fetcher = DocumentFetcher(
                config=searched,
                providers=tenant_providers,
                audit=audit,
                keyring=keyring,
                quota=quota,
                hourly_chars=hourly_fetch_chars,
                clock=clock,
                executor=executor,
                tenant_id=tenant_id,
            )
        tenants[tenant_id] = TenantServices(retriever=retriever, fetcher=fetcher)
        retrievers[tenant_id] = retriever

    tools = EsraTools(config=config, tenants=tenants, audit=audit, clock=clock)
    # One allowed-hosts setting for the whole host: the SDK checks Host and Origin on /mcp,
    # HostHeaderCheck the Host of every other route.
    security = _transport_security(bind_host, allowed_hosts, allowed_origins)
    sessions = StreamableHTTPSessionManager(
        app=tools.server(),
        json_response=True,
        stateless=True,
        security_settings=security,
    )
    metadata = _resource_metadata(resource_url, verifier.issuers, resource_name)
    endpoint = RequireAuthMiddleware(
        # Inside authentication: a caller without a valid token learns nothing but 401.
        OneMessageExchange(StreamableHTTPASGIApp(sessions)),
        required_scopes=[],
        resource_metadata_url=AnyHttpUrl(
            f"{parsed.scheme}://{parsed.netloc}{metadata_path(resource_url)}"
        ),
    )

    async def protected_resource(_request: Request) -> Response:
        return JSONResponse(metadata, headers={"Access-Control-Allow-Origin": "*"})

    async def healthz(_request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        # A mounted app's lifespan never runs, so the host runs the session manager itself.
        # Other hosts' breaker openings are applied for as long as this one serves (at once
        # done when the executor shares its breakers with no one).
        following = asyncio.create_task(executor.follow_openings())
        try:
            async with sessions.run():
                yield
        finally:
            following.cancel()
            try:
                await following
            except asyncio.CancelledError:
                pass
            except Exception:
                # The broadcast reconnects by itself; anything else ended the sharing early.
                _log.exception("following other hosts' breaker openings failed")

    routes: list[BaseRoute] = [
        Route(MCP_PATH, endpoint=endpoint),
        Route(metadata_path(resource_url), protected_resource, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readiness_endpoint(readiness), methods=["GET"]),
        Mount(ADMIN_PATH, app=admin),
        Mount(
            PORTAL_PATH,
            app=portal_app(
                stores=document_stores or {},
                verifier=verifier,
                roles_claim=roles_claim,
                cross_tenant_roles_claim=cross_tenant_roles_claim,
                secure_cookies=secure_cookies,
                explainer=explainer,
            ),
        ),
    ]
    middleware = [
        Middleware(AuthenticationMiddleware, backend=BearerAuthBackend(verifier)),
        Middleware(AuthContextMiddleware),
    ]
    if security is not None:
        # Outermost, so a foreign Host is refused before any token is even verified.
        middleware.insert(
            0,
            Middleware(
                HostHeaderCheck,
                allowed_hosts=security.allowed_hosts,
                open_paths={"/healthz", "/readyz"},
            ),
        )
    return Starlette(
        routes=routes,
        # Unknown paths and methods anywhere on the host answer in the admin API's JSON shape.
        exception_handlers={HTTPException: handle_http},
        middleware=middleware,
        lifespan=lifespan,
    )
