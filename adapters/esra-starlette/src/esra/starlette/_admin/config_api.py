"""Configuration endpoints: the triple-control chain's four services over HTTP.

``PUT /secrets/{reference}`` (``SECURITY_MANAGE``) → ``PUT /sources/{id}`` and
``PUT /capabilities/{id}`` (``ESRA_DATA_MANAGE``) → ``PUT /access-policies/{slug}``
(``GOVERNANCE_MANAGE``) → ``PUT /exposures/{slug}`` and ``POST /exposures/{slug}/publish``
(``ESRA_EXPOSURE_MANAGE``); ``GET /config`` shows the draft (``ESRA_DATA_READ``). The core
services check each role and audit every attempt; bodies are the configuration document's
own JSON shapes (``docs/configuration.md``), structured by the core's converter, so a bad
field is reported with its path. A body may leave out ``tenant_id``: it is the tenant acted
on (``ESRA-Tenant``, else the token's).

Each tenant's draft starts as the configuration the host already runs, and publishing hands
the new snapshot to the running host at once.

Drafts live in a ``WorkspaceStore`` (in memory unless the host passes a durable one). Every
change answers the new version in an ``ETag`` header; a request carrying ``If-Match:
"<version>"`` is applied only to that version, and a change that raced another — named
version or not — is refused ``409 ESRA_CONFLICT`` instead of overwriting it. An optional
``Esra-Change-Reason`` header is recorded with the change (who and when are the token's
subject and the host's clock).

Every endpoint that takes a body checks the caller's role before reading it: a caller
without the role gets 403 (audited as a denial, like the core's own check) and its body is
never parsed, so it can neither make the host parse hostile JSON nor learn how a document
must be shaped. A role holder's request refused here, before the core sees it (a body or
header that is not valid), is audited as ``rejected`` with its error code as the reason, so
every attempt is on record whichever layer refused it.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Awaitable
from typing import Any, TypedDict, TypeVar

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from esra.core.admin import (
    AccessPolicyService,
    Administrator,
    AdminWorkspace,
    ConfigConflictError,
    ConfigPublisher,
    ConnectionSecretService,
    DataModelService,
    ExposureService,
    HostLookups,
    InMemoryWorkspaceStore,
    LookupService,
    NotPermittedError,
    Role,
    WorkspaceStore,
    adopt,
    record_admin_action,
)
from esra.core.audit import AuditDimension
from esra.core.codes import AuditEvent
from esra.core.config import (
    AccessPolicy,
    Capability,
    Exposure,
    Mapping,
    Source,
    dump_snapshot,
    load_part,
)
from esra.core.exceptions import ConfigurationError
from esra.core.ports import AuditSink, Clock, ConfigRepository, WritableSecretStore
from esra.starlette._admin.bodies import read_json_object
from esra.starlette._admin.errors import AdminError, AdminErrorCode
from esra.starlette._admin.operator import RoleClaims, acting_tenant_of, administrator_of

__all__ = ["REASON_HEADER", "ConfigApi", "change_reason", "expected_version"]

_T = TypeVar("_T")


REASON_HEADER = "esra-change-reason"
# One entity tag as this API answers it: a draft version in quotes, optionally marked weak.
# Nine digits at most, as the versions a draft reaches; more is no version it ever answered.
_ENTITY_TAG = re.compile(r'(?P<weak>W/)?"(?P<version>0|[1-9][0-9]{0,8})"')
_OWS = " \t"
_ONE_VERSION = 'If-Match must name one draft version, as the ETag answered it: If-Match: "7".'
_MAX_REASON_CHARS = 500


def _workspace_view(workspace: AdminWorkspace) -> dict[str, Any]:
    return {"version": workspace.version, "publishedVersion": workspace.published_version}


def _etag(workspace: AdminWorkspace) -> dict[str, str]:
    return {"ETag": f'"{workspace.version}"'}


def expected_version(request: Request) -> int | None:
    """The draft version ``If-Match`` names (``None`` without one, or for ``*``).

    If-Match uses the strong comparison (RFC 9110 §13.1.1): a weak tag (``W/"7"``) never
    matches any version, so it is refused as a mismatch, never read as ``"7"``. A version is
    named exactly as the ``ETag`` answered it — one quoted decimal without a leading zero —
    so no other spelling of a number can match one octet-for-octet unequal to it.

    Raises:
        AdminError: ``ESRA_CONFLICT`` for a weak tag; ``ESRA_INVALID_REQUEST`` for anything
            but one quoted version number, or If-Match named more than once.
    """
    named = request.headers.getlist("if-match")
    if not named:
        return None
    if len(named) > 1:
        # Two header lines are one list (RFC 9110 §5.3), and a change names one version.
        raise AdminError(AdminErrorCode.ESRA_INVALID_REQUEST, _ONE_VERSION)
    raw = named[0].strip(_OWS)
    if raw == "*":
        return None
    tag = _ENTITY_TAG.fullmatch(raw)
    if tag is None:
        raise AdminError(AdminErrorCode.ESRA_INVALID_REQUEST, _ONE_VERSION)
    if tag["weak"]:
        raise AdminError(
            AdminErrorCode.ESRA_CONFLICT,
            "If-Match compares entity tags strongly, so the weak tag "
            f'W/"{tag["version"]}" matches no version: send the ETag as it was answered, '
            f'If-Match: "{tag["version"]}".',
        )
    return int(tag["version"])


def change_reason(request: Request) -> str | None:
    """The ``Esra-Change-Reason`` header, if any (at most 500 printable characters).

    Raises:
        AdminError: ``ESRA_INVALID_REQUEST`` for a longer or non-printable reason.
    """
    raw = request.headers.get(REASON_HEADER)
    if raw is None or not raw.strip():
        return None
    if len(raw) > _MAX_REASON_CHARS or not raw.isprintable():
        raise AdminError(
            AdminErrorCode.ESRA_INVALID_REQUEST,
            f"Esra-Change-Reason must be at most {_MAX_REASON_CHARS} printable characters.",
        )
    return raw.strip()


class _Versioned(TypedDict):
    expected_version: int | None
    reason: str | None


def _versioned(request: Request) -> _Versioned:
    return {"expected_version": expected_version(request), "reason": change_reason(request)}


class ConfigApi:
    """The configuration endpoints over one ``WorkspaceStore``."""

    def __init__(
        self,
        *,
        config: ConfigRepository,
        publisher: ConfigPublisher,
        secrets: WritableSecretStore,
        audit: AuditSink,
        clock: Clock,
        role_claims: RoleClaims,
        workspaces: WorkspaceStore | None = None,
        lookups: HostLookups | None = None,
    ) -> None:
        self._config = config
        self._audit = audit
        self._clock = clock
        self._workspaces: WorkspaceStore = workspaces or InMemoryWorkspaceStore()
        self._role_claims = role_claims
        self._secrets = ConnectionSecretService(self._workspaces, secrets, audit=audit, clock=clock)
        self._model = DataModelService(self._workspaces, audit=audit, clock=clock, secrets=secrets)
        self._policies = AccessPolicyService(self._workspaces, audit=audit, clock=clock)
        self._exposures = ExposureService(
            self._workspaces, publisher, audit=audit, clock=clock, secrets=secrets
        )
        self._lookups = LookupService(
            self._workspaces, host=lookups or HostLookups(), audit=audit, clock=clock
        )

    def routes(self) -> list[Route]:
        """The endpoints, relative to the admin API's base path."""
        return [
            Route("/config", self.view, methods=["GET"]),
            Route("/lookups", self.lookups, methods=["GET"]),
            Route("/secrets/{reference}", self.put_secret, methods=["PUT"]),
            Route("/sources/{source_id}", self.model_source, methods=["PUT"]),
            Route("/capabilities/{capability_id}", self.define_capability, methods=["PUT"]),
            Route("/access-policies/{slug}", self.author_policy, methods=["PUT"]),
            Route("/exposures/{slug}", self.bind_exposure, methods=["PUT"]),
            Route("/exposures/{slug}/publish", self.publish, methods=["POST"]),
        ]

    async def _admin(self, request: Request) -> tuple[Administrator, str]:
        admin = administrator_of(request, self._role_claims)
        tenant_id = acting_tenant_of(request)
        # Only for a caller with some grant there: a tenant named in ESRA-Tenant by a caller
        # without one must not even have its draft started.
        if admin.roles_on(tenant_id) and await self._workspaces.load(tenant_id) is None:
            running = await self._config.snapshot(tenant_id)
            if running is not None:
                await adopt(self._workspaces, running, subject="esra-host", at=self._clock.now())
        return admin, tenant_id

    async def _permitted(
        self,
        request: Request,
        role: Role,
        event: AuditEvent,
        dimensions: dict[str, AuditDimension],
    ) -> tuple[Administrator, str]:
        """The administrator and tenant, once ``role`` is known to be held; else 403.

        Runs before the body is read. The denial is audited as the core records its own
        (subject, role, and the ids the URL names), since the core never sees this attempt.
        """
        admin, tenant_id = await self._admin(request)
        if not admin.may(role, tenant_id):
            await record_admin_action(
                self._audit,
                self._clock,
                event,
                by=admin,
                tenant_id=tenant_id,
                outcome="denied",
                reason="role",
                dimensions={"subject": admin.subject, "role": role.value, **dimensions},
            )
            raise AdminError(AdminErrorCode.ESRA_FORBIDDEN, "Your roles do not permit this action.")
        return admin, tenant_id

    @contextlib.asynccontextmanager
    async def _audited_refusals(
        self,
        admin: Administrator,
        tenant_id: str,
        role: Role,
        event: AuditEvent,
        dimensions: dict[str, AuditDimension],
    ) -> AsyncIterator[None]:
        """Audit an ``AdminError`` raised inside as a ``rejected`` attempt (``conflict`` for
        ``ESRA_CONFLICT``), then re-raise it.

        Wraps what a permitted request's handler does before calling the core (reading the
        body and headers): the core audits what it refuses itself, never what is refused
        before it. The reason is the error's code, never its message, which may quote the
        body.
        """
        try:
            yield
        except AdminError as exc:
            # A weak If-Match is a version mismatch, audited as the core audits its own.
            refused = "conflict" if exc.code is AdminErrorCode.ESRA_CONFLICT else "rejected"
            await record_admin_action(
                self._audit,
                self._clock,
                event,
                by=admin,
                tenant_id=tenant_id,
                outcome=refused,
                reason=exc.code.value,
                dimensions={"subject": admin.subject, "role": role.value, **dimensions},
            )
            raise

    @staticmethod
    async def _checked(call: Awaitable[AdminWorkspace]) -> Response:
        try:
            workspace = await call
        except NotPermittedError:
            raise AdminError(
                AdminErrorCode.ESRA_FORBIDDEN, "Your roles do not permit this action."
            ) from None
        except ConfigConflictError as exc:
            raise AdminError(AdminErrorCode.ESRA_CONFLICT, str(exc)) from None
        except ConfigurationError as exc:
            raise AdminError(AdminErrorCode.ESRA_CONFIGURATION_INVALID, str(exc)) from None
        return JSONResponse(_workspace_view(workspace), headers=_etag(workspace))

    @staticmethod
    def _part(data: object, kind: type[_T], tenant_id: str, what: str) -> _T:
        if isinstance(data, dict):
            data = {"tenant_id": tenant_id, **data}
        try:
            return load_part(data, kind, what=what)
        except ConfigurationError as exc:
            raise AdminError(AdminErrorCode.ESRA_CONFIGURATION_INVALID, str(exc)) from None

    @staticmethod
    def _same(name: str, in_path: str, in_body: str) -> None:
        if in_path != in_body:
            raise AdminError(
                AdminErrorCode.ESRA_INVALID_REQUEST,
                f"The body's {name} {in_body!r} differs from the URL's {in_path!r}.",
            )

    async def lookups(self, request: Request) -> Response:
        """GET /lookups: the model profiles, client applications and trusted issuers the
        tenant's configuration may name (``ESRA_DATA_READ``, implied by both manage roles)."""
        admin, tenant_id = await self._admin(request)
        try:
            found = await self._lookups.lookups(admin, tenant_id)
        except NotPermittedError:
            raise AdminError(
                AdminErrorCode.ESRA_FORBIDDEN, "Your roles do not permit this action."
            ) from None
        return JSONResponse(
            {
                "modelProfiles": [
                    {"name": p.name, "kind": p.kind, "model": p.model} for p in found.model_profiles
                ],
                "clientApplications": list(found.client_applications),
                "trustedIssuers": [
                    {"issuer": i.issuer, "audiences": list(i.audiences)}
                    for i in found.trusted_issuers
                ],
            },
            headers={"cache-control": "no-store"},
        )

    async def view(self, request: Request) -> Response:
        """GET /config: the tenant's draft, its version and the secret references."""
        admin, tenant_id = await self._admin(request)
        try:
            workspace = await self._model.view(admin, tenant_id)
        except NotPermittedError:
            raise AdminError(
                AdminErrorCode.ESRA_FORBIDDEN, "Your roles do not permit this action."
            ) from None
        return JSONResponse(
            headers=_etag(workspace),
            content={
                **_workspace_view(workspace),
                "secrets": [
                    {"reference": reference, "writes": writes}
                    for reference, writes in sorted(workspace.secret_rotations.items())
                ],
                "configuration": dump_snapshot(workspace.snapshot),
            },
        )

    async def put_secret(self, request: Request) -> Response:
        """PUT /secrets/{reference} ``{"value": "..."}``: create or rotate a secret."""
        reference = request.path_params["reference"]
        role, event = Role.SECURITY_MANAGE, AuditEvent.ADMIN_SECRET_WRITE
        dims: dict[str, AuditDimension] = {"reference": reference}
        admin, tenant_id = await self._permitted(request, role, event, dims)
        async with self._audited_refusals(admin, tenant_id, role, event, dims):
            body = await read_json_object(request)
            value = body.get("value")
            if not isinstance(value, str) or not value or set(body) != {"value"}:
                raise AdminError(
                    AdminErrorCode.ESRA_INVALID_REQUEST,
                    'The body must be {"value": "<the secret>"} with a non-empty string.',
                )
            versioned = _versioned(request)
        return await self._checked(
            self._secrets.put_secret(admin, tenant_id, reference, value, **versioned)
        )

    async def model_source(self, request: Request) -> Response:
        """PUT /sources/{id} ``{"source": {...}, "mappings": [...]}``: model a source."""
        role, event = Role.ESRA_DATA_MANAGE, AuditEvent.ADMIN_SOURCE_MODEL
        dims: dict[str, AuditDimension] = {"source_id": request.path_params["source_id"]}
        admin, tenant_id = await self._permitted(request, role, event, dims)
        async with self._audited_refusals(admin, tenant_id, role, event, dims):
            body = await read_json_object(request)
            unknown = set(body) - {"source", "mappings"}
            if unknown or "source" not in body:
                raise AdminError(
                    AdminErrorCode.ESRA_INVALID_REQUEST,
                    'The body must be {"source": {...}, "mappings": [...]}.',
                )
            source = self._part(body["source"], Source, tenant_id, "source")
            self._same("source id", request.path_params["source_id"], source.id)
            raw_mappings = body.get("mappings", [])
            if not isinstance(raw_mappings, list):
                raise AdminError(AdminErrorCode.ESRA_INVALID_REQUEST, "'mappings' must be a list.")
            mappings = [
                self._part(m, Mapping, tenant_id, f"mappings[{i}]")
                for i, m in enumerate(raw_mappings)
            ]
            versioned = _versioned(request)
        return await self._checked(
            self._model.model_source(admin, tenant_id, source, mappings, **versioned)
        )

    async def define_capability(self, request: Request) -> Response:
        """PUT /capabilities/{id}: add or replace a capability."""
        role, event = Role.ESRA_DATA_MANAGE, AuditEvent.ADMIN_CAPABILITY_DEFINE
        dims: dict[str, AuditDimension] = {"capability_id": request.path_params["capability_id"]}
        admin, tenant_id = await self._permitted(request, role, event, dims)
        async with self._audited_refusals(admin, tenant_id, role, event, dims):
            capability = self._part(
                await read_json_object(request), Capability, tenant_id, "capability"
            )
            self._same("capability id", request.path_params["capability_id"], capability.id)
            versioned = _versioned(request)
        return await self._checked(
            self._model.define_capability(admin, tenant_id, capability, **versioned)
        )

    async def author_policy(self, request: Request) -> Response:
        """PUT /access-policies/{slug}: the access policy of a tool."""
        role, event = Role.GOVERNANCE_MANAGE, AuditEvent.ADMIN_POLICY_AUTHOR
        dims: dict[str, AuditDimension] = {"slug": request.path_params["slug"]}
        admin, tenant_id = await self._permitted(request, role, event, dims)
        async with self._audited_refusals(admin, tenant_id, role, event, dims):
            policy = self._part(await read_json_object(request), AccessPolicy, tenant_id, "policy")
            self._same("slug", request.path_params["slug"], policy.slug)
            versioned = _versioned(request)
        return await self._checked(
            self._policies.author_policy(admin, tenant_id, policy, **versioned)
        )

    async def bind_exposure(self, request: Request) -> Response:
        """PUT /exposures/{slug}: bind an exposure as a draft (unpublished)."""
        role, event = Role.ESRA_EXPOSURE_MANAGE, AuditEvent.ADMIN_EXPOSURE_BIND
        dims: dict[str, AuditDimension] = {"slug": request.path_params["slug"]}
        admin, tenant_id = await self._permitted(request, role, event, dims)
        async with self._audited_refusals(admin, tenant_id, role, event, dims):
            exposure = self._part(await read_json_object(request), Exposure, tenant_id, "exposure")
            self._same("slug", request.path_params["slug"], exposure.slug)
            versioned = _versioned(request)
        return await self._checked(
            self._exposures.bind_exposure(admin, tenant_id, exposure, **versioned)
        )

    async def publish(self, request: Request) -> Response:
        """POST /exposures/{slug}/publish: re-validate and make the draft the running config."""
        slug = request.path_params["slug"]
        role, event = Role.ESRA_EXPOSURE_MANAGE, AuditEvent.ADMIN_EXPOSURE_PUBLISH
        dims: dict[str, AuditDimension] = {"slug": slug}
        admin, tenant_id = await self._permitted(request, role, event, dims)
        async with self._audited_refusals(admin, tenant_id, role, event, dims):
            versioned = _versioned(request)
        return await self._checked(self._exposures.publish(admin, tenant_id, slug, **versioned))
