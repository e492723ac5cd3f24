"""The store's settings through the admin API: ``GET`` and ``PUT /store/settings``.

``GET`` (``ESRA_DATA_READ``) answers the tenant's settings — scan policy, byte retention,
attempt ceiling, batch size — with the revision as its ``ETag`` (revision 0: never
configured, the host's ``[store]`` defaults). ``PUT`` (``ESRA_DATA_MANAGE``) takes a JSON
object holding any of those settings and applies it to the revision ``If-Match`` names (the
current one without it); a change that raced another is ``409 ESRA_CONFLICT``, a malformed
setting ``400 ESRA_INVALID_REQUEST`` naming it. The core's ``StoreConfigurationService``
checks the role and audits every change with the settings before and after, refusals too;
a caller without the role gets 403 before its body is read. What this module refuses of a
manager's change before the core sees it — a store not Ready, an If-Match naming no
revision, a body that is not a JSON object, an unknown setting — it hands to the core's
``refused`` as the core records its own: ``rejected`` with the error's code (``conflict``
for a weak If-Match, a version mismatch), never the request's text.

The settings live in the store's own database, so the store must be Ready (409
``ESRA_STORE_NOT_READY`` otherwise), and every worker on the store applies a change at its
next turn.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any, Literal

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from esra.core.admin import NotPermittedError, Role
from esra.core.docstore import (
    Operator,
    StoreConfiguration,
    StoreNotReadyError,
    StoreSettingsConflictError,
    StoreSettingsError,
)
from esra.starlette._admin.bodies import read_json_object
from esra.starlette._admin.config_api import expected_version
from esra.starlette._admin.errors import AdminError, AdminErrorCode
from esra.starlette._admin.operator import RoleClaims, operator_of
from esra.starlette._stores import TenantStore

__all__ = ["SETTING_NAMES", "StoreSettingsApi", "settings_view"]

# The API's names (camelCase, like every admin view) for the core's settings.
SETTING_NAMES = {
    "scanPolicy": "scan_policy",
    "retainBytes": "retain_bytes",
    "maxAttempts": "max_attempts",
    "batchPerTenant": "batch_per_tenant",
}
_API_NAMES = {core: api for api, core in SETTING_NAMES.items()}


def settings_view(configuration: StoreConfiguration) -> dict[str, Any]:
    """The settings as the API answers them, with who changed them last and when."""
    settings = configuration.settings
    return {
        "scanPolicy": settings.scan_policy.value,
        "retainBytes": settings.retain_bytes,
        "maxAttempts": settings.max_attempts,
        "batchPerTenant": settings.batch_per_tenant,
        "revision": configuration.revision,
        "updatedAt": configuration.updated_at.isoformat() if configuration.updated_at else None,
        "updatedBy": configuration.updated_by,
    }


def _forbidden() -> AdminError:
    return AdminError(AdminErrorCode.ESRA_FORBIDDEN, "Your roles do not permit this.")


def _etag(configuration: StoreConfiguration) -> dict[str, str]:
    return {"ETag": f'"{configuration.revision}"', "cache-control": "no-store"}


def _require_ready(store: TenantStore) -> None:
    try:
        store.lifecycle.require_ready()
    except StoreNotReadyError as exc:
        raise AdminError(
            AdminErrorCode.ESRA_STORE_NOT_READY,
            f"The document store is {exc.status.value}: its settings live in it, so "
            "initialise it first.",
        ) from None


def _changes(body: Mapping[str, object]) -> dict[str, object]:
    """The body's settings under the core's names; an unknown one is refused by name."""
    unknown = sorted(name for name in body if name not in SETTING_NAMES)
    if unknown:
        shown = unknown[0] if unknown[0].isprintable() and len(unknown[0]) <= 32 else "?"
        raise AdminError(
            AdminErrorCode.ESRA_INVALID_REQUEST,
            f"Unknown setting {shown!r}; use {', '.join(sorted(SETTING_NAMES))}.",
        )
    return {SETTING_NAMES[name]: value for name, value in body.items()}


@contextlib.asynccontextmanager
async def _audited_refusals(store: TenantStore, operator: Operator) -> AsyncIterator[None]:
    """Hand an ``AdminError`` raised inside to the core's ``refused``, then re-raise it.

    Wraps only what is refused before the core sees the change: the core records its own
    refusals, and each refusal is to be recorded once. The reason is the error's code,
    never its message, which may quote the body.
    """
    try:
        yield
    except AdminError as exc:
        # A weak If-Match is a version mismatch, recorded as the core records its own.
        outcome: Literal["rejected", "conflict"] = (
            "conflict" if exc.code is AdminErrorCode.ESRA_CONFLICT else "rejected"
        )
        await store.configuration.refused(operator, outcome, reason=exc.code.value)
        raise


class StoreSettingsApi:
    """``/store/settings`` over each tenant's :class:`TenantStore`."""

    def __init__(self, stores: Mapping[str, TenantStore], *, role_claims: RoleClaims) -> None:
        self._stores = stores
        self._role_claims = role_claims

    def routes(self) -> list[Route]:
        """The endpoints, relative to the admin API's base path."""
        return [
            Route("/store/settings", self.read, methods=["GET"]),
            Route("/store/settings", self.configure, methods=["PUT"]),
        ]

    def _operator_and_store(self, request: Request) -> tuple[Operator, TenantStore]:
        operator = operator_of(request, self._role_claims)
        if not operator.may(Role.ESRA_DATA_READ):
            raise _forbidden()
        store = self._store_of(operator)
        _require_ready(store)
        return operator, store

    def _store_of(self, operator: Operator) -> TenantStore:
        store = self._stores.get(operator.tenant_id)
        if store is None:
            raise AdminError(
                AdminErrorCode.ESRA_NOT_FOUND, "This host has no document store for your tenant."
            )
        return store

    async def read(self, request: Request) -> Response:
        """GET /store/settings: the tenant's settings, the revision as the ETag."""
        operator, store = self._operator_and_store(request)
        configuration = await store.configuration.current(operator)
        return JSONResponse(settings_view(configuration), headers=_etag(configuration))

    async def configure(self, request: Request) -> Response:
        """PUT /store/settings: change any of the settings, at the revision If-Match names."""
        operator = operator_of(request, self._role_claims)
        if not operator.may(Role.ESRA_DATA_READ):
            # Not even a reader, on its own tenant: the core audits the refused attempt all
            # the same (a tenant without a store has no core to audit it; another tenant's
            # store is never reached by a caller with no grant there); the body is never read.
            unread = self._stores.get(operator.tenant_id)
            if unread is not None and not operator.cross_tenant:
                with contextlib.suppress(NotPermittedError):
                    await unread.configuration.configure(operator, {}, expected_revision=0)
            raise _forbidden()
        store = self._store_of(operator)
        if not operator.may(Role.ESRA_DATA_MANAGE):
            # The core audits the refused attempt; the body is never read. Before the store's
            # readiness: a caller without the role never learns what else is wrong.
            with contextlib.suppress(NotPermittedError):
                await store.configuration.configure(operator, {}, expected_revision=0)
            raise _forbidden()
        async with _audited_refusals(store, operator):
            _require_ready(store)
            expected = expected_version(request)
            changes = _changes(await read_json_object(request))
        if expected is None:
            expected = (await store.configuration.current(operator)).revision
        try:
            saved = await store.configuration.configure(
                operator, changes, expected_revision=expected
            )
        except StoreSettingsError as exc:
            shown = _API_NAMES.get(exc.parameter, exc.parameter)
            message = exc.public_message.replace(exc.parameter, shown)
            raise AdminError(AdminErrorCode.ESRA_INVALID_REQUEST, message) from None
        except StoreSettingsConflictError as exc:
            raise AdminError(
                AdminErrorCode.ESRA_CONFLICT,
                f"The settings are at revision {exc.current}, not {exc.expected}: reload them "
                "and apply the change again.",
            ) from None
        return JSONResponse(settings_view(saved), headers=_etag(saved))
