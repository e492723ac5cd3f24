"""The store status page: Disabled → Enabled → Initializing → Ready or Failed.

Initialisation runs in the background (DDL can outlast any HTTP timeout), so the initialise
button answers at once and the status page follows the job: while the store is Initializing
the page reloads itself every two seconds until it shows Ready or Failed.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from esra.core.admin import NotPermittedError, Role
from esra.core.docstore import StoreNotReadyError, StoreState, StoreStatus
from esra.starlette._portal.access import Access, forbidden
from esra.starlette._portal.errors import PortalError
from esra.starlette._portal.layout import callout, page
from esra.starlette._portal.markup import Markup, html, join, render_template
from esra.starlette._portal.notices import Notice, redirect_with_notice
from esra.starlette._portal.paths import base_path, portal_url
from esra.starlette._portal.session import Visitor
from esra.starlette._portal.store_settings_pages import settings_section
from esra.starlette._portal.views import count_filters
from esra.starlette._stores import TenantStore

__all__ = ["POLL_INTERVAL_S", "StorePages"]

POLL_INTERVAL_S = 2

_LABELS = {
    StoreStatus.DISABLED: "Disabled",
    StoreStatus.ENABLED: "Enabled",
    StoreStatus.INITIALIZING: "Initializing",
    StoreStatus.READY: "Ready",
    StoreStatus.FAILED: "Failed",
}
_EXPLANATIONS = {
    StoreStatus.DISABLED: (
        "The document store is off for this tenant. Enable it, then initialise it."
    ),
    StoreStatus.ENABLED: (
        "The store is enabled but not initialised. Initialising creates the store's schema; "
        "it runs in the background."
    ),
    StoreStatus.INITIALIZING: (
        f"Initialisation is running in the background. This page refreshes every "
        f"{POLL_INTERVAL_S} seconds until the store is Ready or Failed."
    ),
    StoreStatus.READY: "The store is Ready: documents can be uploaded, reviewed and searched.",
    StoreStatus.FAILED: "Initialisation failed. Fix the cause below, then initialise again.",
}


class StorePages:
    """``/status`` and its two actions, enable and initialise."""

    def __init__(self, access: Access) -> None:
        self._access = access

    def routes(self) -> list[Route]:
        """The routes, relative to the portal's mount path."""
        return [
            Route("/", self.home, methods=["GET"]),
            Route("/status", self.status, methods=["GET"]),
            Route("/status/enable", self.enable, methods=["POST"]),
            Route("/status/initialise", self.initialise, methods=["POST"]),
        ]

    async def home(self, request: Request) -> Response:
        """The documents once the store is Ready; its status page until then."""
        visitor = self._access.visitor(request)
        ready = self._access.store(visitor).lifecycle.current.status is StoreStatus.READY
        return RedirectResponse(
            portal_url(request, "/documents" if ready else "/status"), status_code=303
        )

    async def status(self, request: Request) -> Response:
        """GET /status: the lifecycle state; polls while Initializing; counts once Ready."""
        visitor = self._access.visitor(request)
        store = self._access.store(visitor)
        state = await store.lifecycle.state(visitor.operator)
        content = render_template(
            "status.html",
            tenant=store.tenant_id,
            badge=html(
                '<span class="badge badge-{}">{}</span>', state.status.value, _LABELS[state.status]
            ),
            since=html(
                '<time datetime="{}">{}</time>',
                state.changed_at.isoformat(),
                state.changed_at.strftime("%Y-%m-%d %H:%M:%S UTC"),
            ),
            explanation=self._explanation(state),
            actions=await self._actions(request, visitor, store, state),
        )
        polling = state.status is StoreStatus.INITIALIZING
        return page(
            request,
            title="Store status",
            content=content,
            visitor=visitor,
            refresh_s=POLL_INTERVAL_S if polling else None,
            current="/status",
        )

    async def enable(self, request: Request) -> Response:
        """POST /status/enable: turn the store on (ESRA_DATA_MANAGE)."""
        visitor = self._access.visitor(request)
        store = self._access.store(visitor)
        await self._access.form(request, visitor)
        try:
            await store.lifecycle.enable(visitor.operator)
        except NotPermittedError:
            raise forbidden("Enabling the store") from None
        return redirect_with_notice(request, "/status", Notice.ENABLED)

    async def initialise(self, request: Request) -> Response:
        """POST /status/initialise: start initialisation and follow it on the status page."""
        visitor = self._access.visitor(request)
        store = self._access.store(visitor)
        await self._access.form(request, visitor)
        try:
            await store.lifecycle.initialise(visitor.operator)
        except NotPermittedError:
            raise forbidden("Initialising the store") from None
        except StoreNotReadyError as exc:
            already = exc.status is StoreStatus.INITIALIZING
            raise PortalError(
                409,
                "Cannot initialise now",
                "Initialisation is already running; the status page follows it."
                if already
                else "The store is disabled: enable it before initialising it.",
                links=(("/status", "Store status"),),
            ) from None
        return redirect_with_notice(request, "/status", Notice.INITIALISING)

    @staticmethod
    def _explanation(state: StoreState) -> Markup:
        parts = [html("<p>{}</p>", _EXPLANATIONS[state.status])]
        if state.status is StoreStatus.FAILED:
            parts.append(
                callout(
                    html(
                        "<strong>Reason:</strong> <code>{}</code>. <strong>Remedy:</strong> {}",
                        state.failure or "unknown",
                        state.remedy or "Check the host's log, then initialise again.",
                    ),
                    kind="error",
                    role="alert",
                )
            )
        return join(parts)

    async def _actions(
        self, request: Request, visitor: Visitor, store: TenantStore, state: StoreState
    ) -> Markup:
        base = base_path(request)
        if state.status is StoreStatus.READY:
            counts = await store.documents.counts(visitor.operator)
            configuration = await store.configuration.current(visitor.operator)
            return html(
                '<nav aria-labelledby="counts-heading" class="counts">'
                '<h2 id="counts-heading">Documents by state</h2>{}</nav>{}',
                count_filters(base, counts, None),
                settings_section(base, visitor, configuration),
            )
        action = {
            StoreStatus.DISABLED: ("/status/enable", "Enable the store"),
            StoreStatus.ENABLED: ("/status/initialise", "Initialise the store"),
            StoreStatus.FAILED: ("/status/initialise", "Initialise again"),
        }.get(state.status)
        if action is None:
            return Markup()
        if not visitor.may(Role.ESRA_DATA_MANAGE):
            return html(
                "<p>{}</p>",
                "An operator with ESRA_DATA_MANAGE must take the next step; you have read access.",
            )
        path, label = action
        return html(
            '<form method="post" action="{}"><input type="hidden" name="csrf" value="{}">'
            '<button type="submit">{}</button></form>',
            base + path,
            visitor.csrf,
            label,
        )
