"""The review list, one document's review page, and the actions taken from it.

Release, re-index and delete are POST forms (CSRF-checked) that redirect back with a notice.
Release is offered only for a Quarantined document and only after the page has shown what
the scanner matched; re-index only where the original bytes were retained, with the reason
stated where they were not; download links and the download endpoint only for
``ESRA_DATA_MANAGE``, the endpoint refusing a reader even when called directly.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote, urlencode

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from esra.core.admin import NotPermittedError, Role
from esra.core.docstore import (
    DocumentCursor,
    DocumentReadOnlyError,
    DocumentRow,
    DocumentSearchError,
    DocumentState,
    Operator,
    sanitize_filename,
)
from esra.starlette._document_search import document_search_of
from esra.starlette._portal.access import Access, not_found
from esra.starlette._portal.errors import PortalError
from esra.starlette._portal.layout import page
from esra.starlette._portal.markup import Markup, html, join, render_template
from esra.starlette._portal.notices import Notice, redirect_with_notice
from esra.starlette._portal.paths import base_path
from esra.starlette._portal.session import Visitor
from esra.starlette._portal.views import (
    NOT_RETAINED,
    STATE_LABELS,
    count_filters,
    document_callouts,
    document_facts,
    documents_table,
    findings_section,
    search_form,
)
from esra.starlette._stores import TenantStore

__all__ = ["DocumentPages"]

_Action = Callable[[TenantStore, Operator, str], Awaitable[Any]]


class DocumentPages:
    """``/documents``, ``/documents/{id}`` and the document actions."""

    def __init__(self, access: Access) -> None:
        self._access = access

    def routes(self) -> list[Route]:
        """The routes, relative to the portal's mount path."""
        one = "/documents/{document_id}"
        return [
            Route("/documents", self.list_documents, methods=["GET"]),
            Route(one, self.review, methods=["GET"]),
            Route(one + "/release", self.release, methods=["POST"]),
            Route(one + "/reindex", self.reindex, methods=["POST"]),
            Route(one + "/delete", self.delete, methods=["POST"]),
            Route(one + "/download", self.download, methods=["GET"]),
        ]

    async def list_documents(self, request: Request) -> Response:
        """GET /documents[?q=…&state=…&scope=…&uploader=…&type=…&since=…&until=…&cursor=…]:
        store-wide counts (as filters), a search form, and one page of matching documents."""
        visitor, store = self._access.visitor_and_ready_store(request)
        params = _search_params(request)
        selected = _state_filter(params.get("state"))
        try:
            query = document_search_of(params.items())
        except DocumentSearchError as exc:
            raise PortalError(
                400, "Invalid search", str(exc), links=(("/documents", "All documents"),)
            ) from None
        found = await store.documents.search(visitor.operator, query)
        base = base_path(request)
        label = STATE_LABELS[selected] if selected else "All states"
        searching = query.text is not None or len(params) > (1 if selected else 0)
        caption = f"{len(found.rows)} documents, {label.lower()}"
        caption += ", matching the search, newest first" if searching else ", newest first"
        content = render_template(
            "documents.html",
            counts=count_filters(base, found.counts, selected),
            search=search_form(base, params),
            list_heading=f"Documents: {label}",
            table=documents_table(
                base,
                found.rows,
                may_download=visitor.may(Role.ESRA_DATA_MANAGE),
                caption=caption,
            ),
            more=_next_page(base, params, found.next_cursor),
        )
        return page(
            request, title="Documents", content=content, visitor=visitor, current="/documents"
        )

    async def review(self, request: Request) -> Response:
        """GET /documents/{id}: facts, failure or zero-segment callouts, findings, actions."""
        visitor, store = self._access.visitor_and_ready_store(request)
        row = await self._row(visitor, store, request.path_params["document_id"])
        content = render_template(
            "document.html",
            base=base_path(request),
            facts=document_facts(row.document),
            callouts=document_callouts(row),
            findings=findings_section(row.document.findings),
            actions=_actions(base_path(request), visitor, row),
        )
        return page(
            request,
            title=f"Document: {row.document.title}",
            content=content,
            visitor=visitor,
            current="/documents",
        )

    async def release(self, request: Request) -> Response:
        """POST …/release: Quarantined → Indexed, audited with the operator."""

        async def act(store: TenantStore, operator: Operator, document_id: str) -> Any:
            return await store.documents.release(operator, document_id)

        document_id = await self._act(
            request, act, "Releasing a document", "Only a Quarantined document can be released."
        )
        return redirect_with_notice(request, f"/documents/{quote(document_id)}", Notice.RELEASED)

    async def reindex(self, request: Request) -> Response:
        """POST …/reindex: back to Pending with attempts reset; needs the retained bytes."""

        async def act(store: TenantStore, operator: Operator, document_id: str) -> Any:
            return await store.documents.reindex(operator, document_id)

        document_id = await self._act(
            request,
            act,
            "Re-indexing a document",
            "This document cannot be re-indexed: its original bytes were not retained, or it "
            "is being processed right now.",
        )
        return redirect_with_notice(request, f"/documents/{quote(document_id)}", Notice.REINDEXED)

    async def delete(self, request: Request) -> Response:
        """POST …/delete (with the confirmation box ticked): soft delete."""

        async def act(store: TenantStore, operator: Operator, document_id: str) -> Any:
            return await store.documents.delete(operator, document_id)

        await self._act(
            request,
            act,
            "Deleting a document",
            "The document could not be deleted.",
            confirm="confirm",
        )
        return redirect_with_notice(request, "/documents", Notice.DELETED)

    async def download(self, request: Request) -> Response:
        """GET …/download: the original bytes as an attachment (ESRA_DATA_MANAGE only)."""
        visitor, store = self._access.visitor_and_ready_store(request)
        document_id = request.path_params["document_id"]
        if not visitor.may(Role.ESRA_DATA_MANAGE):
            raise await self._access.denied(
                store.documents.download(visitor.operator, document_id), "Downloading originals"
            )
        try:
            title, data = await store.documents.download(visitor.operator, document_id)
        except NotPermittedError:
            raise not_found() from None
        return Response(
            data,
            media_type="application/octet-stream",
            headers={
                "Content-Disposition": _attachment(title),
                "Cache-Control": "no-store",
            },
        )

    async def _row(self, visitor: Visitor, store: TenantStore, document_id: str) -> DocumentRow:
        row = await store.documents.document(visitor.operator, document_id)
        if row is None:
            raise not_found()
        return row

    async def _act(
        self,
        request: Request,
        action: _Action,
        name: str,
        conflict: str,
        *,
        confirm: str | None = None,
    ) -> str:
        """Check session, CSRF, role and document, then run ``action``; its document id."""
        visitor, store = self._access.visitor_and_ready_store(request)
        form = await self._access.form(request, visitor)
        document_id: str = request.path_params["document_id"]
        if not visitor.may(Role.ESRA_DATA_MANAGE):
            raise await self._access.denied(action(store, visitor.operator, document_id), name)
        await self._row(visitor, store, document_id)
        if confirm is not None and form.get(confirm) != "yes":
            raise PortalError(
                400,
                "Not confirmed",
                "Tick the confirmation box to delete the document.",
                links=((f"/documents/{quote(document_id)}", "Back to the document"),),
            )
        try:
            await action(store, visitor.operator, document_id)
        except DocumentReadOnlyError as refusal:
            raise PortalError(
                409,
                "Read-only document",
                str(refusal),
                links=((f"/documents/{quote(document_id)}", "Back to the document"),),
            ) from None
        except NotPermittedError:
            raise PortalError(
                409,
                "Action not available",
                conflict,
                links=((f"/documents/{quote(document_id)}", "Back to the document"),),
            ) from None
        return document_id


_DATE_FIELDS = ("since", "until")


def _search_params(request: Request) -> dict[str, str]:
    """The search fields of the form (one value each; blanks dropped; others ignored).

    The form's date fields give a day, which is taken as midnight UTC: ``since`` a day
    includes it, ``until`` a day excludes it.
    """
    params: dict[str, str] = {}
    for name in ("q", "state", "scope", "uploader", "type", "since", "until", "cursor"):
        value = request.query_params.get(name, "").strip()
        if not value:
            continue
        if name in _DATE_FIELDS and len(value) == 10:
            value += "T00:00:00+00:00"
        params[name] = value
    return params


def _next_page(base: str, params: dict[str, str], cursor: DocumentCursor | None) -> Markup:
    if cursor is None:
        return Markup()
    following = {**params, "cursor": cursor.encode()}
    return html(
        '<p><a href="{}/documents?{}" rel="next">Next page</a></p>', base, urlencode(following)
    )


def _state_filter(value: str | None) -> DocumentState | None:
    if not value:
        return None
    try:
        return DocumentState(value)
    except ValueError:
        names = ", ".join(state.value for state in DocumentState)
        raise PortalError(
            400,
            "Unknown state",
            f"There is no document state {value!r}; filter by one of: {names}.",
            links=(("/documents", "All documents"),),
        ) from None


def _actions(base: str, visitor: Visitor, row: DocumentRow) -> Markup:
    """The actions the visitor may take on the document, each explained."""
    document = row.document
    if not visitor.may(Role.ESRA_DATA_MANAGE):
        return html(
            '<section aria-labelledby="actions-heading"><h2 id="actions-heading">Actions</h2>'
            "<p>{}</p></section>",
            "You have read access (ESRA_DATA_READ). Releasing, re-indexing, deleting and "
            "downloading need ESRA_DATA_MANAGE.",
        )
    action_base = f"{base}/documents/{quote(document.id)}"
    if row.read_only_reason is not None:
        return _read_only_actions(action_base, row)
    sections: list[Markup] = []
    if row.release_available:
        sections.append(
            _form(
                action_base + "/release",
                visitor.csrf,
                "Release from quarantine",
                "Releasing overrides the scanner's findings above: the document becomes "
                "Indexed and searchable. The release is recorded with your name.",
                f"Release {document.title}",
            )
        )
    if row.reindex_available:
        sections.append(
            _form(
                action_base + "/reindex",
                visitor.csrf,
                "Re-index",
                "Extract the retained original again (attempts reset). Use it after the cause "
                "of a failure is fixed.",
                f"Re-index {document.title}",
                secondary=True,
            )
        )
    elif not document.bytes_retained:
        sections.append(_section("Re-index", html("<p>{}</p>", NOT_RETAINED)))
    else:
        sections.append(
            _section(
                "Re-index",
                html("<p>{}</p>", "Being processed now; re-index once processing finishes."),
            )
        )
    if document.bytes_retained:
        sections.append(_original_section(action_base, document.title))
    sections.append(_delete_form(action_base + "/delete", visitor.csrf, document.title))
    return html(
        '<div class="actions"><h2>Actions</h2>{}</div>',
        join(sections),
    )


def _read_only_actions(action_base: str, row: DocumentRow) -> Markup:
    """A connector-owned document: the reason it is read-only, no forms (download stays)."""
    sections = [_section("Read-only", html("<p>{}</p>", row.read_only_reason or ""))]
    if row.document.bytes_retained:
        sections.append(_original_section(action_base, row.document.title))
    return html('<div class="actions"><h2>Actions</h2>{}</div>', join(sections))


def _original_section(action_base: str, title: str) -> Markup:
    return _section(
        "Original file",
        html(
            '<p><a href="{}/download" download>Download the original of {}</a> '
            "(saved as a file, never opened in the browser).</p>",
            action_base,
            title,
        ),
    )


def _section(heading: str, body: Markup) -> Markup:
    return html("<section><h3>{}</h3>{}</section>", heading, body)


def _form(
    action: str, csrf: str, heading: str, explanation: str, button: str, *, secondary: bool = False
) -> Markup:
    css = Markup(' class="secondary"') if secondary else Markup()
    return _section(
        heading,
        html(
            '<p>{}</p><form method="post" action="{}"><input type="hidden" name="csrf" '
            'value="{}"><button type="submit"{}>{}</button></form>',
            explanation,
            action,
            csrf,
            css,
            button,
        ),
    )


def _delete_form(action: str, csrf: str, title: str) -> Markup:
    return _section(
        "Delete",
        html(
            "<p>Deleting removes the document from search, fetch and this list.</p>"
            '<form method="post" action="{}" class="stack"><input type="hidden" name="csrf" '
            'value="{}"><p><input type="checkbox" id="confirm-delete" name="confirm" '
            'value="yes" required> <label for="confirm-delete">Yes, delete {}</label></p>'
            '<button type="submit" class="danger">Delete document</button></form>',
            action,
            csrf,
            title,
        ),
    )


def _attachment(title: str) -> str:
    """A Content-Disposition naming the file safely: ASCII fallback plus RFC 5987 UTF-8."""
    safe = sanitize_filename(title)
    ascii_name = safe.encode("ascii", "replace").decode("ascii").replace('"', "_")
    return f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(safe)}"
