"""The page shell every portal page shares: skip link, navigation, heading, notice, content.

Pages are never cached (they show one operator's view of their tenant), and a page that
follows a running job (store initialisation) refreshes itself with ``<meta refresh>``, so
polling needs no JavaScript.
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.requests import Request
from starlette.responses import HTMLResponse

from esra.core.admin import Role
from esra.starlette._portal.markup import Markup, html, join, render_template
from esra.starlette._portal.notices import clear_notice, take_notice
from esra.starlette._portal.paths import base_path
from esra.starlette._portal.session import Visitor

__all__ = ["callout", "link_list", "page"]

_SECTIONS: tuple[tuple[str, str, Role], ...] = (
    ("/status", "Store status", Role.ESRA_DATA_READ),
    ("/documents", "Documents", Role.ESRA_DATA_READ),
    ("/upload", "Upload", Role.ESRA_DATA_MANAGE),
    ("/explain", "Explain", Role.ESRA_EXPOSURE_MANAGE),
)


def page(
    request: Request,
    *,
    title: str,
    content: Markup,
    visitor: Visitor | None,
    status_code: int = 200,
    refresh_s: int | None = None,
    current: str | None = None,
) -> HTMLResponse:
    """Render a full page; shows (and consumes) a pending notice.

    Args:
        request: the request being answered (for the mount path and the notice).
        title: the page's ``<title>`` and ``<h1>``.
        content: the page body below the heading.
        visitor: the signed-in operator, for the navigation; ``None`` before sign-in.
        status_code: the HTTP status.
        refresh_s: reload the page after this many seconds (a job is running).
        current: the navigation section this page belongs to.
    """
    notice = take_notice(request)
    refresh = (
        html('<meta http-equiv="refresh" content="{}">\n', refresh_s) if refresh_s else Markup()
    )
    body = render_template(
        "layout.html",
        title=title,
        base=base_path(request),
        refresh=refresh,
        navigation=_navigation(request, visitor, current),
        notice=callout(notice.text, kind="ok", role="status") if notice else Markup(),
        content=content,
    )
    response = HTMLResponse(body, status_code=status_code)
    response.headers["Cache-Control"] = "no-store"
    if notice is not None:
        clear_notice(request, response)
    return response


def callout(message: str | Markup, *, kind: str, role: str | None = None) -> Markup:
    """A boxed message; ``kind`` is ok, warning or error, and the text says which."""
    role_attribute = html(' role="{}"', role) if role else Markup()
    return html('<div class="callout callout-{}"{}><p>{}</p></div>', kind, role_attribute, message)


def link_list(request: Request, links: Sequence[tuple[str, str]]) -> Markup:
    """Portal links, as a list of next steps."""
    if not links:
        return Markup()
    base = base_path(request)
    items = (html('<li><a href="{}">{}</a></li>', base + path, label) for path, label in links)
    return html("<ul>{}</ul>", join(items))


def _navigation(request: Request, visitor: Visitor | None, current: str | None) -> Markup:
    base = base_path(request)
    if visitor is None:
        return html(
            '<nav class="site-nav" aria-label="Portal"><ul><li><a href="{}">Sign in</a></li>'
            "</ul></nav>",
            base + "/sign-in",
        )
    items = []
    for path, label, role in _SECTIONS:
        if not visitor.may(role):
            continue
        marker = Markup(' aria-current="page"') if path == current else Markup()
        items.append(html('<li><a href="{}"{}>{}</a></li>', base + path, marker, label))
    if visitor.may_choose_tenant:
        marker = Markup(' aria-current="page"') if current == "/tenant" else Markup()
        items.append(html('<li><a href="{}"{}>Switch tenant</a></li>', base + "/tenant", marker))
    operator = visitor.operator
    roles = ", ".join(sorted(operator.roles | operator.cross_tenant_roles)) or "none"
    return html(
        '<nav class="site-nav" aria-label="Portal"><ul>{items}</ul></nav>'
        '<div class="account"><p class="identity">Signed in as <strong>{subject}</strong> on '
        "tenant <strong>{tenant}</strong> (roles: {roles})</p>"
        '<form method="post" action="{action}" class="inline">'
        '<input type="hidden" name="csrf" value="{csrf}">'
        '<button type="submit" class="secondary">Sign out</button></form></div>',
        items=join(items),
        subject=visitor.caller.subject,
        tenant=operator.tenant_id,
        roles=roles,
        action=base + "/sign-out",
        csrf=visitor.csrf,
    )
