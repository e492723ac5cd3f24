"""The tenant chooser: an operator holding cross-tenant roles picks the tenant to act on.

Offered only to a visitor whose token reaches beyond its own tenant. The choices are the
tenants with a store on this host that the token may read — cross-tenant roles hold only on
tenants its issuer is trusted for — and a submitted tenant outside them is refused with the
same page whether or not it exists. The choice lives in the session (see
``esra.starlette._portal.session``), and every record of what the operator then does in that
tenant is audited as cross-tenant by the core.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from esra.starlette._portal.access import Access
from esra.starlette._portal.errors import PortalError
from esra.starlette._portal.layout import page
from esra.starlette._portal.markup import Markup, html, join
from esra.starlette._portal.paths import base_path, portal_url
from esra.starlette._portal.session import Visitor

__all__ = ["TenantPages"]


def _not_offered() -> PortalError:
    return PortalError(
        403,
        "Tenant not available",
        "Your token grants no ESRA & Data role on that tenant's store on this host.",
        links=(("/tenant", "Choose a tenant"),),
    )


class TenantPages:
    """``/tenant``: the chooser (GET) and the choice (POST, CSRF-checked)."""

    def __init__(self, access: Access) -> None:
        self._access = access

    def routes(self) -> list[Route]:
        """The routes, relative to the portal's mount path."""
        return [
            Route("/tenant", self.chooser, methods=["GET"]),
            Route("/tenant", self.choose, methods=["POST"]),
        ]

    def _chooser_visitor(self, request: Request) -> Visitor:
        # Not ``access.visitor``: an operator with cross-tenant roles only holds nothing on
        # its own tenant, and must still reach the page that takes it elsewhere.
        visitor = self._access.sessions.visitor(request)
        if not visitor.may_choose_tenant:
            raise PortalError(
                403,
                "No other tenant",
                "Your token grants roles on its own tenant only, so there is nothing to choose.",
                links=(("/", "Portal home"),),
            )
        return visitor

    async def chooser(self, request: Request) -> Response:
        """GET /tenant: one button per tenant the visitor may act on, the current one marked."""
        visitor = self._chooser_visitor(request)
        acting = visitor.operator.tenant_id
        action = base_path(request) + "/tenant"
        choices = [
            html(
                '<li><form method="post" action="{action}" class="inline">'
                '<input type="hidden" name="csrf" value="{csrf}">'
                '<input type="hidden" name="tenant" value="{tenant}">'
                '<button type="submit"{current}>{tenant}</button></form></li>',
                action=action,
                csrf=visitor.csrf,
                tenant=tenant,
                current=Markup(' aria-current="true" class="secondary"')
                if tenant == acting
                else Markup(),
            )
            for tenant in self._access.choosable_tenants(visitor)
        ]
        content = html(
            "<p>You are acting on tenant <strong>{acting}</strong>. Your token's tenant is "
            "<strong>{home}</strong>; actions on any other tenant are audited there as "
            "cross-tenant, with your tenant.</p>{choices}",
            acting=acting,
            home=visitor.caller.tenant_id,
            choices=html('<ul class="choices">{}</ul>', join(choices))
            if choices
            else html("<p>No tenant on this host has a store your token may read.</p>"),
        )
        return page(
            request, title="Choose a tenant", content=content, visitor=visitor, current="/tenant"
        )

    async def choose(self, request: Request) -> Response:
        """POST /tenant: act on the submitted tenant from now on; then its store's status."""
        visitor = self._chooser_visitor(request)
        form = await self._access.form(request, visitor)
        tenant = form.get("tenant")
        if not isinstance(tenant, str) or tenant not in self._access.choosable_tenants(visitor):
            raise _not_offered()
        response = RedirectResponse(portal_url(request, "/status"), status_code=303)
        self._access.sessions.choose_tenant(request, response, visitor, tenant)
        return response
