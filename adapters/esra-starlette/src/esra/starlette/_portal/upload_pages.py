"""The upload form and its result: each file's own outcome, never a batch verdict.

One bad file in ten must not make the operator re-upload the nine that were fine, so the
result lists every file: stored (now Pending, queued for extraction), stored as Failed (a
``.docx`` that broke a safety limit, kept for review) or refused, with its classified reason
and the remedy. The result is the POST's own response rather than a
redirect, because the per-file outcomes exist only for this request; submitting it again is
harmless, as every stored file would come back refused as a duplicate naming its document.
"""

from __future__ import annotations

from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from esra.core.admin import Role
from esra.sqlite import DEFAULT_SCOPE_CLAIM
from esra.starlette._admin.limits import AdminLimits
from esra.starlette._portal.access import Access
from esra.starlette._portal.bodies import bounded_body
from esra.starlette._portal.errors import PortalError
from esra.starlette._portal.layout import callout, page
from esra.starlette._portal.markup import Markup, render_template
from esra.starlette._portal.paths import base_path
from esra.starlette._portal.session import Visitor
from esra.starlette._portal.views import human_size, upload_outcome_rows
from esra.starlette._stores import TenantStore
from esra.starlette._uploads import MAX_SCOPE_CHARS, read_each, upload_scope

__all__ = ["MAX_FILES_PER_UPLOAD", "MAX_UPLOAD_BYTES", "UploadPages"]

# The admin API's defaults: one request carries at most this much, in this many files.
MAX_UPLOAD_BYTES = AdminLimits().upload_bytes
MAX_FILES_PER_UPLOAD = AdminLimits().files_per_upload


class UploadPages:
    """``/upload``: the form (GET) and each file's outcome (POST)."""

    def __init__(self, access: Access) -> None:
        self._access = access

    def routes(self) -> list[Route]:
        """The routes, relative to the portal's mount path."""
        return [
            Route("/upload", self.form, methods=["GET"]),
            Route("/upload", self.upload, methods=["POST"]),
        ]

    async def form(self, request: Request) -> Response:
        """GET /upload: the form (ESRA_DATA_MANAGE)."""
        visitor, store = self._manager_and_store(request)
        return self._form_page(request, visitor, store)

    async def upload(self, request: Request) -> Response:
        """POST /upload (multipart: ``files`` and ``scope``): each file's outcome."""
        visitor, store = self._access.visitor_and_ready_store(request)
        if not visitor.may(Role.ESRA_DATA_MANAGE):
            raise await self._access.denied(
                store.documents.upload(visitor.operator, (), scope=store.default_scope),
                "Uploading documents",
            )
        body = _bounded_body(request)
        try:
            async with body.form(
                max_files=MAX_FILES_PER_UPLOAD, max_fields=8, max_part_size=64 * 1024
            ) as form:
                self._access.sessions.require_csrf(visitor, form.get("csrf"))
                files = [
                    item
                    for item in form.getlist("files")
                    if isinstance(item, UploadFile) and item.filename
                ]
                if not files:
                    return self._form_page(
                        request, visitor, store, problem="Choose at least one file to upload."
                    )
                scope = upload_scope(form.get("scope"), store.default_scope)
                if scope is None:
                    return self._form_page(
                        request,
                        visitor,
                        store,
                        problem=f"The security scope must be printable text of at most "
                        f"{MAX_SCOPE_CHARS} characters.",
                    )
                outcomes = await store.documents.upload(
                    visitor.operator,
                    read_each(files, store.limits.max_bytes),
                    scope=scope,
                    limits=store.limits,
                )
        except HTTPException as exc:
            # The multipart parser refused the body (too many files or fields, malformed).
            raise PortalError(
                400,
                "Upload refused",
                f"The upload could not be read: {exc.detail}. Upload at most "
                f"{MAX_FILES_PER_UPLOAD} files at once.",
                links=(("/upload", "Upload form"),),
            ) from None
        kept = sum(1 for outcome in outcomes if outcome.document is not None)
        failed = sum(1 for outcome in outcomes if outcome.stored_as_failed)
        refused = len(outcomes) - kept
        content = render_template(
            "upload_result.html",
            base=base_path(request),
            summary=_summary(len(outcomes), stored=kept - failed, failed=failed, refused=refused),
            rows=upload_outcome_rows(base_path(request), outcomes),
        )
        return page(
            request, title="Upload result", content=content, visitor=visitor, current="/upload"
        )

    def _manager_and_store(self, request: Request) -> tuple[Visitor, TenantStore]:
        visitor, store = self._access.visitor_and_ready_store(request)
        if not visitor.may(Role.ESRA_DATA_MANAGE):
            raise PortalError(
                403,
                "Not permitted",
                "Uploading documents needs the ESRA_DATA_MANAGE role on your tenant; your "
                "token grants only read access.",
                links=(("/documents", "Documents"),),
            )
        return visitor, store

    @staticmethod
    def _form_page(
        request: Request, visitor: Visitor, store: TenantStore, *, problem: str | None = None
    ) -> Response:
        content = render_template(
            "upload.html",
            base=base_path(request),
            csrf=visitor.csrf,
            message=callout(problem, kind="error", role="alert") if problem else Markup(),
            max_size=human_size(store.limits.max_bytes),
            scope=store.default_scope,
            scope_claim=DEFAULT_SCOPE_CLAIM,
        )
        return page(
            request,
            title="Upload documents",
            content=content,
            visitor=visitor,
            status_code=400 if problem else 200,
            current="/upload",
        )


def _bounded_body(request: Request) -> Request:
    """The upload, refused before it is read unless it is a declared multipart body within
    :data:`MAX_UPLOAD_BYTES`, and counted as it arrives (files spool to disk as they are
    parsed): read the form from the returned request.

    The declared ``Content-Length`` alone bounds nothing when a server frames the body
    otherwise (a chunked body beside it); browsers always declare it for a form.
    """
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise PortalError(415, "Upload refused", "Upload files with the portal's upload form.")
    return bounded_body(request, limit=MAX_UPLOAD_BYTES, noun="upload", too_large=_upload_too_large)


def _upload_too_large() -> PortalError:
    return PortalError(
        413,
        "Upload too large",
        f"One upload may carry at most {human_size(MAX_UPLOAD_BYTES)}; upload the files "
        "in smaller batches.",
        links=(("/upload", "Upload form"),),
    )


def _summary(total: int, *, stored: int, failed: int, refused: int) -> str:
    # "stored as failed" only when it happened: it is the rare outcome that needs a look.
    failures = f", {failed} stored as failed" if failed else ""
    return f"{total} files: {stored} stored{failures}, {refused} refused."
