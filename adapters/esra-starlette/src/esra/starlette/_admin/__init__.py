"""The admin API: JSON over HTTP, with its OpenAPI document, for configuration and the store.

Mounted by ``create_app`` at ``/admin/v1``. Authentication is the host's (the same bearer
JWTs as ``/mcp``); authorisation is the core's role-checked services, with roles read from
two token claims (``esra_roles`` on the token's own tenant, ``esra_cross_tenant_roles`` on
any tenant the issuer is trusted for, named per request in ``ESRA-Tenant``; both
configurable). Every error is a JSON body with a code.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from esra.core.admin import (
    ConfigPublisher,
    ExplainService,
    HostLookups,
    InMemorySecretVault,
    WorkspaceStore,
)
from esra.core.audit import AuditReader
from esra.core.ports import AuditSink, Clock, ConfigRepository, WritableSecretStore
from esra.starlette._admin.audit_api import AuditApi
from esra.starlette._admin.config_api import ConfigApi
from esra.starlette._admin.errors import AdminError, AdminErrorCode, handle_http, handle_unexpected
from esra.starlette._admin.explain_api import ExplainApi
from esra.starlette._admin.limits import AdminLimits, BodySizeLimit
from esra.starlette._admin.openapi import openapi_document
from esra.starlette._admin.operator import (
    DEFAULT_CROSS_TENANT_ROLES_CLAIM,
    DEFAULT_ROLES_CLAIM,
    RoleClaims,
)
from esra.starlette._admin.store_api import StoreApi
from esra.starlette._admin.store_settings_api import StoreSettingsApi
from esra.starlette._stores import TenantStore

__all__ = [
    "ADMIN_PATH",
    "DEFAULT_CROSS_TENANT_ROLES_CLAIM",
    "DEFAULT_ROLES_CLAIM",
    "AdminError",
    "AdminErrorCode",
    "AdminLimits",
    "admin_app",
]

ADMIN_PATH = "/admin/v1"


def admin_app(
    *,
    config: ConfigRepository,
    stores: Mapping[str, TenantStore],
    audit: AuditSink,
    clock: Clock,
    publisher: ConfigPublisher | None = None,
    secrets: WritableSecretStore | None = None,
    workspaces: WorkspaceStore | None = None,
    roles_claim: str = DEFAULT_ROLES_CLAIM,
    cross_tenant_roles_claim: str = DEFAULT_CROSS_TENANT_ROLES_CLAIM,
    limits: AdminLimits | None = None,
    base_path: str = ADMIN_PATH,
    audit_reader: AuditReader | None = None,
    lookups: HostLookups | None = None,
    explainer: ExplainService | None = None,
) -> Starlette:
    """The admin API as an ASGI app, to mount at ``base_path``.

    Args:
        config: the running configuration (each tenant's draft starts from it).
        stores: each tenant's document store; a tenant absent here has none.
        audit: where the core services record every administrative action.
        clock: time for the audit records and the store.
        publisher: receives published snapshots; without one the configuration endpoints
            are not served (the configuration is then read-only, from files).
        secrets: where connection secrets are written (in memory by default).
        workspaces: where drafts, their history and publications are kept (in memory by
            default; ``SqliteConfigStore`` / ``PostgresConfigStore`` keep them durably).
        roles_claim: the token claim holding the caller's administrative roles (on the
            token's own tenant).
        cross_tenant_roles_claim: the token claim holding roles granted on every tenant the
            token's issuer is trusted for; a request names the tenant in ``ESRA-Tenant``.
        limits: request body limits.
        base_path: where the app is mounted (named in the OpenAPI document).
        lookups: the host's model profiles and trusted issuers ``GET /lookups`` lists
            (with the client applications each tenant's configuration names); none without.
        audit_reader: reads audit records back for ``GET /audit``; without one that
            endpoint answers 404 (this host keeps no readable audit log).
        explainer: explains invocations for ``POST /explain``; without one that endpoint
            is not served.
    """
    limits = limits or AdminLimits()
    role_claims = RoleClaims(roles_claim, cross_tenant_roles_claim)
    routes: list[BaseRoute] = list(
        StoreApi(stores, role_claims=role_claims, limits=limits).routes()
    )
    routes.extend(StoreSettingsApi(stores, role_claims=role_claims).routes())
    routes.extend(
        AuditApi(audit_reader, audit=audit, clock=clock, role_claims=role_claims).routes()
    )
    if explainer is not None:
        routes.extend(ExplainApi(explainer, role_claims=role_claims).routes())
    if publisher is not None:
        config_api = ConfigApi(
            config=config,
            publisher=publisher,
            secrets=secrets or InMemorySecretVault(),
            audit=audit,
            clock=clock,
            role_claims=role_claims,
            workspaces=workspaces,
            lookups=lookups,
        )
        routes.extend(config_api.routes())
    document = openapi_document(base_path)
    if publisher is None:
        document["paths"] = {
            path: item
            for path, item in document["paths"].items()
            if "/store" in path or path.endswith(("/audit", "/explain"))
        }

    async def openapi(_request: Request) -> Response:
        return JSONResponse(document)

    routes.append(Route("/openapi.json", openapi, methods=["GET"]))
    return Starlette(
        routes=routes,
        middleware=[Middleware(BodySizeLimit, limits=limits)],
        exception_handlers={
            AdminError: handle_http,
            HTTPException: handle_http,
            Exception: handle_unexpected,
        },
    )
