"""What every portal handler checks first: who is signing, which store, may they, is it Ready.

The same rules as the admin API: a visitor needs ``ESRA_DATA_READ`` on the tenant they act on
(their token's, or one a cross-tenant role lets them choose) to see anything,
``ESRA_DATA_MANAGE`` to change anything; the tenant's store must exist on this host;
documents are listed and changed only once the store is Ready. A refused action still goes
through the core service so the denial is audited with the operator.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Mapping
from typing import Any

from starlette.datastructures import FormData
from starlette.requests import Request

from esra.core.admin import NotPermittedError, Role
from esra.core.docstore import StoreNotReadyError, StoreStatus
from esra.starlette._auth import AuthenticatedCaller
from esra.starlette._portal.bodies import bounded_body
from esra.starlette._portal.errors import PortalError
from esra.starlette._portal.session import Sessions, Visitor
from esra.starlette._stores import TenantStore

__all__ = ["MAX_FORM_BYTES", "Access", "forbidden", "not_found", "not_ready", "read_form"]

# Every portal form but the upload is a few short fields; the sign-in token is the longest.
MAX_FORM_BYTES = 64 * 1024

_NOT_READY_ADVICE = {
    StoreStatus.DISABLED: "It is disabled: enable it, then initialise it, on the status page.",
    StoreStatus.ENABLED: "It is enabled but not initialised: initialise it on the status page.",
    StoreStatus.INITIALIZING: "It is initializing: the status page follows it until Ready.",
    StoreStatus.FAILED: "Its initialisation failed: the status page shows the remedy.",
}


def forbidden(action: str) -> PortalError:
    """403: the visitor's roles do not permit ``action``."""
    return PortalError(
        403,
        "Not permitted",
        f"{action} needs the ESRA_DATA_MANAGE role on your tenant; your token grants only "
        "read access. Ask an administrator for the role, then sign in with a new token.",
        links=(("/documents", "Documents"),),
    )


def not_found() -> PortalError:
    """404: no such (non-deleted) document in the visitor's tenant."""
    return PortalError(
        404,
        "Document not found",
        "There is no such document in your tenant's store; it may have been deleted.",
        links=(("/documents", "All documents"),),
    )


def not_ready(status: StoreStatus) -> PortalError:
    """409: the store cannot list or take documents in ``status``."""
    advice = _NOT_READY_ADVICE.get(status, "")
    return PortalError(
        409,
        "Store not ready",
        f"The document store is not Ready yet. {advice}".strip(),
        links=(("/status", "Store status"),),
    )


async def read_form(request: Request) -> FormData:
    """The submitted URL-encoded form, refused unless it is small, counted as it arrives.

    The form parser keeps field values in memory, and the sign-in form is open to anyone,
    so the declared length is checked before any byte is read and the bytes that actually
    arrive are counted (a server may frame the body other than by its declared length):
    the whole form is read within :data:`MAX_FORM_BYTES` before any of it is parsed.
    Browsers always declare the length of a form.

    Raises:
        PortalError: 400 with both a declared length and a transfer encoding, 411 without
            a declared length, 413 over :data:`MAX_FORM_BYTES` declared or received.
    """
    body = bounded_body(request, limit=MAX_FORM_BYTES, noun="form", too_large=_form_too_large)
    await body.body()
    return await body.form(max_files=0, max_fields=16)


def _form_too_large() -> PortalError:
    return PortalError(413, "Form refused", "The form is larger than any portal form.")


class Access:
    """The checks shared by the portal's handlers.

    Args:
        stores: each tenant's store on this host.
        sessions: reads the visitor from the session cookie.
    """

    def __init__(self, stores: Mapping[str, TenantStore], sessions: Sessions) -> None:
        self._stores = stores
        self.sessions = sessions

    def visitor(self, request: Request) -> Visitor:
        """The signed-in visitor holding at least ``ESRA_DATA_READ``.

        Raises:
            SignInRequiredError: not signed in, or the token no longer verifies.
            PortalError: 403 when the token grants no ESRA & Data role.
        """
        visitor = self.sessions.visitor(request)
        if not visitor.may(Role.ESRA_DATA_READ):
            raise PortalError(
                403,
                "No access to the document store",
                f"Your token grants no ESRA & Data role on tenant {visitor.operator.tenant_id}. "
                "The portal needs ESRA_DATA_READ (to review) or ESRA_DATA_MANAGE (to manage).",
                links=(("/tenant", "Choose a tenant"),) if visitor.may_choose_tenant else (),
            )
        return visitor

    def starts_at_chooser(self, caller: AuthenticatedCaller) -> bool:
        """Whether a freshly signed-in ``caller`` should pick a tenant first: its token
        reaches other tenants, and its own has no store here it may read."""
        administrator = self.sessions.administrator(caller)
        home = caller.tenant_id
        reaches_others = any(grant.tenant_id != home for grant in administrator.grants)
        reads_home = home in self._stores and administrator.may(Role.ESRA_DATA_READ, home)
        return reaches_others and not reads_home

    def choosable_tenants(self, visitor: Visitor) -> tuple[str, ...]:
        """The tenants with a store here that ``visitor`` may read, in order."""
        administrator = visitor.administrator
        return tuple(sorted(t for t in self._stores if administrator.may(Role.ESRA_DATA_READ, t)))

    def store(self, visitor: Visitor) -> TenantStore:
        """The store of the tenant the visitor acts on.

        Raises:
            PortalError: 404 when this host serves no store for the tenant.
        """
        store = self._stores.get(visitor.operator.tenant_id)
        if store is None:
            raise PortalError(
                404,
                "No document store",
                f"This host has no document store for tenant {visitor.operator.tenant_id}.",
                links=(("/tenant", "Choose a tenant"),) if visitor.may_choose_tenant else (),
            )
        return store

    def visitor_and_ready_store(self, request: Request) -> tuple[Visitor, TenantStore]:
        """The visitor and their store, which must be Ready."""
        visitor = self.visitor(request)
        store = self.store(visitor)
        try:
            store.lifecycle.require_ready()
        except StoreNotReadyError as exc:
            raise not_ready(exc.status) from None
        return visitor, store

    async def form(self, request: Request, visitor: Visitor) -> FormData:
        """The submitted URL-encoded form, once its CSRF token is this session's."""
        form = await read_form(request)
        self.sessions.require_csrf(visitor, form.get("csrf"))
        return form

    @staticmethod
    async def denied(call: Awaitable[Any], action: str) -> PortalError:
        """Run a refused manage action through the core (which audits the denial); 403."""
        with contextlib.suppress(NotPermittedError):
            await call
        return forbidden(action)
