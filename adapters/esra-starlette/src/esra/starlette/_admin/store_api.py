"""The document store's admin endpoints: lifecycle, upload, review list and actions.

Each endpoint reads the operator from the verified token and calls the core's role-checked,
audited services (``DocumentStoreService``, ``StoreLifecycle``); this module adds only HTTP:
which status and code each outcome gets. A missing role is 403, a document the tenant does
not have (or has deleted) 404, an action that does not apply to the document's state 409,
and documents cannot be uploaded until the store is Ready (409 ``ESRA_STORE_NOT_READY``).
Release, re-index and delete of a connector-owned document answer 409
``ESRA_DOCUMENT_READ_ONLY``: its connector owns its changes.

A refused attempt at a managing action is handed to the core before the 403, so the core
audits the denial with the operator and tenant — whether the caller reads the store
(``ESRA_DATA_READ``) or, on its own tenant, holds no ESRA role at all. A caller naming
another tenant on which it holds no grant never reaches that tenant's store.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from esra.core.admin import NotPermittedError, Role
from esra.core.docstore import (
    DocumentReadOnlyError,
    DocumentSearchError,
    Operator,
    StoreNotReadyError,
    StoreStatus,
)
from esra.starlette._admin.errors import AdminError, AdminErrorCode
from esra.starlette._admin.limits import AdminLimits
from esra.starlette._admin.operator import RoleClaims, operator_of
from esra.starlette._admin.views import counts_view, document_view, outcome_view, state_view
from esra.starlette._document_search import document_search_of
from esra.starlette._downloads import download_headers
from esra.starlette._stores import TenantStore
from esra.starlette._uploads import MAX_SCOPE_CHARS, read_each, upload_scope

__all__ = ["StoreApi"]

_T = TypeVar("_T")


def _forbidden() -> AdminError:
    return AdminError(AdminErrorCode.ESRA_FORBIDDEN, "Your roles do not permit this action.")


def _not_found() -> AdminError:
    return AdminError(AdminErrorCode.ESRA_NOT_FOUND, "No such document.")


def _read_only(refusal: DocumentReadOnlyError) -> AdminError:
    # The core's message names the connector and says changes come from its source.
    return AdminError(AdminErrorCode.ESRA_DOCUMENT_READ_ONLY, str(refusal))


def _not_ready(status: StoreStatus) -> AdminError:
    advice = {
        StoreStatus.DISABLED: "Enable the store, then initialise it.",
        StoreStatus.ENABLED: "Initialise the store first.",
        StoreStatus.INITIALIZING: "Initialisation is running; poll the store's status.",
        StoreStatus.FAILED: "Initialisation failed; see the store's status for the remedy.",
    }.get(status, "")
    return AdminError(
        AdminErrorCode.ESRA_STORE_NOT_READY,
        f"The document store is {status.value}. {advice}".strip(),
    )


class StoreApi:
    """The ``/store`` endpoints over each tenant's :class:`TenantStore`."""

    def __init__(
        self, stores: Mapping[str, TenantStore], *, role_claims: RoleClaims, limits: AdminLimits
    ) -> None:
        self._stores = stores
        self._role_claims = role_claims
        self._limits = limits

    def routes(self) -> list[Route]:
        """The endpoints, relative to the admin API's base path."""
        documents = "/store/documents"
        one = documents + "/{document_id}"
        return [
            Route("/store", self.status, methods=["GET"]),
            Route("/store/enable", self.enable, methods=["POST"]),
            Route("/store/initialise", self.initialise, methods=["POST"]),
            Route(documents, self.list_documents, methods=["GET"]),
            Route(documents, self.upload, methods=["POST"]),
            Route(one, self.get_document, methods=["GET"]),
            Route(one, self.delete, methods=["DELETE"]),
            Route(one + "/release", self.release, methods=["POST"]),
            Route(one + "/reindex", self.reindex, methods=["POST"]),
            Route(one + "/download", self.download, methods=["GET"]),
        ]

    # -- helpers --------------------------------------------------------------------------

    def _operator_and_store(self, request: Request) -> tuple[Operator, TenantStore]:
        operator = operator_of(request, self._role_claims)
        if not operator.may(Role.ESRA_DATA_READ):
            raise _forbidden()
        store = self._stores.get(operator.tenant_id)
        if store is None:
            raise AdminError(
                AdminErrorCode.ESRA_NOT_FOUND,
                "This host has no document store for your tenant.",
            )
        return operator, store

    async def _manager_and_store(
        self, request: Request, attempt: Callable[[TenantStore, Operator], Awaitable[Any]]
    ) -> tuple[Operator, TenantStore]:
        """As ``_operator_and_store``, for a managing action ``attempt``: 403 for a caller
        without ``ESRA_DATA_MANAGE``, after ``attempt`` is made for it — the core refuses it
        and audits the denial with the operator, so a refused action is on the trail whoever
        asked. A caller without even ``ESRA_DATA_READ`` is refused so too on its own
        tenant's store; a tenant without a store has no core to audit it, and another
        tenant's store is never reached by a caller with no grant there.
        """
        operator = operator_of(request, self._role_claims)
        if not operator.may(Role.ESRA_DATA_READ):
            store = self._stores.get(operator.tenant_id)
            if store is not None and not operator.cross_tenant:
                await self._swallow(attempt(store, operator))
            raise _forbidden()
        operator, store = self._operator_and_store(request)
        if not operator.may(Role.ESRA_DATA_MANAGE):
            await self._swallow(attempt(store, operator))
            raise _forbidden()
        return operator, store

    @staticmethod
    async def _checked(call: Awaitable[_T]) -> _T:
        try:
            return await call
        except NotPermittedError:
            raise _forbidden() from None
        except StoreNotReadyError as exc:
            raise _not_ready(exc.status) from None

    async def _document_action(
        self,
        request: Request,
        action: Callable[[TenantStore, Operator, str], Awaitable[Any]],
        conflict: str,
    ) -> Response:
        document_id = request.path_params["document_id"]
        operator, store = await self._manager_and_store(
            request, lambda store, operator: action(store, operator, document_id)
        )
        self._require_ready(store)
        if await store.documents.document(operator, document_id) is None:
            raise _not_found()
        try:
            await action(store, operator, document_id)
        except DocumentReadOnlyError as exc:
            raise _read_only(exc) from None
        except NotPermittedError:
            raise AdminError(AdminErrorCode.ESRA_CONFLICT, conflict) from None
        return await self._one(operator, store, document_id)

    @staticmethod
    async def _swallow(call: Awaitable[Any]) -> None:
        try:
            await call
        except NotPermittedError:
            return

    async def _one(self, operator: Operator, store: TenantStore, document_id: str) -> Response:
        row = await store.documents.document(operator, document_id)
        if row is None:
            raise _not_found()
        return JSONResponse(document_view(row, may_download=operator.may(Role.ESRA_DATA_MANAGE)))

    # -- lifecycle ------------------------------------------------------------------------

    async def status(self, request: Request) -> Response:
        """GET /store: the lifecycle state; once Ready, the store-wide counts too."""
        operator, store = self._operator_and_store(request)
        state = await store.lifecycle.state(operator)
        body = state_view(state)
        if state.status is StoreStatus.READY:
            body["counts"] = counts_view(await store.documents.counts(operator))
        return JSONResponse(body)

    async def enable(self, request: Request) -> Response:
        """POST /store/enable: turn the store on for the tenant (ESRA_DATA_MANAGE)."""
        operator, store = await self._manager_and_store(
            request, lambda store, operator: store.lifecycle.enable(operator)
        )
        state = await self._checked(store.lifecycle.enable(operator))
        return JSONResponse(state_view(state))

    async def initialise(self, request: Request) -> Response:
        """POST /store/initialise: start initialisation; 202, then poll GET /store."""
        operator, store = await self._manager_and_store(
            request, lambda store, operator: store.lifecycle.initialise(operator)
        )
        state = await self._checked(store.lifecycle.initialise(operator))
        return JSONResponse(
            state_view(state),
            status_code=202,
            headers={"Location": request.url.path.removesuffix("/initialise")},
        )

    # -- documents ------------------------------------------------------------------------

    async def list_documents(self, request: Request) -> Response:
        """GET /store/documents[?q=…&state=…&scope=…&type=…&uploader=…&since=…&until=…&limit=…
        &cursor=…]: counts for every state and one page of the matching rows, newest first.

        ``q`` searches the store's own full-text index over the documents' segments, and
        their titles; every state is listed. See ``esra.starlette._document_search``.
        """
        operator, store = self._operator_and_store(request)
        try:
            query = document_search_of(request.query_params.multi_items())
        except DocumentSearchError as exc:
            raise AdminError(AdminErrorCode.ESRA_INVALID_REQUEST, str(exc)) from None
        self._require_ready(store)
        found = await self._checked(store.documents.search(operator, query))
        may_download = operator.may(Role.ESRA_DATA_MANAGE)
        return JSONResponse(
            {
                "counts": counts_view(found.counts),
                "filter": sorted(state.value for state in query.states),
                "documents": [document_view(r, may_download=may_download) for r in found.rows],
                "nextCursor": found.next_cursor.encode() if found.next_cursor else None,
            },
            headers={"cache-control": "no-store"},
        )

    async def get_document(self, request: Request) -> Response:
        """GET /store/documents/{id}: one document, with its findings."""
        operator, store = self._operator_and_store(request)
        self._require_ready(store)
        return await self._one(operator, store, request.path_params["document_id"])

    async def upload(self, request: Request) -> Response:
        """POST /store/documents (multipart, field ``files``, optional ``scope``): 202 with
        each file's own outcome.

        ``stored`` counts files queued for indexing, ``failed`` those kept as Failed documents
        (a ``.docx`` that broke a safety limit, on the review screen with its remedy), and
        ``refused`` those not kept at all.
        """
        operator, store = await self._manager_and_store(
            request,
            lambda store, operator: store.documents.upload(operator, (), scope=store.default_scope),
        )
        self._require_ready(store)
        if not request.headers.get("content-type", "").startswith("multipart/form-data"):
            raise AdminError(
                AdminErrorCode.ESRA_UNSUPPORTED_MEDIA_TYPE,
                "Upload files as multipart/form-data in the field 'files'.",
            )
        async with request.form(
            max_files=self._limits.files_per_upload, max_fields=16, max_part_size=64 * 1024
        ) as form:
            files = [item for item in form.getlist("files") if isinstance(item, UploadFile)]
            if not files:
                raise AdminError(
                    AdminErrorCode.ESRA_INVALID_REQUEST,
                    "Attach at least one file in the multipart field 'files'.",
                )
            scope = _scope(form.get("scope"), store.default_scope)
            per_file = store.limits.max_bytes
            outcomes = await store.documents.upload(
                operator, read_each(files, per_file), scope=scope, limits=store.limits
            )
        kept = sum(1 for outcome in outcomes if outcome.document is not None)
        failed = sum(1 for outcome in outcomes if outcome.stored_as_failed)
        return JSONResponse(
            {
                "stored": kept - failed,
                "failed": failed,
                "refused": len(outcomes) - kept,
                "files": [outcome_view(outcome) for outcome in outcomes],
            },
            status_code=202,
        )

    async def release(self, request: Request) -> Response:
        """POST /store/documents/{id}/release: Quarantined → Indexed, audited with the operator."""

        async def act(store: TenantStore, operator: Operator, document_id: str) -> Any:
            return await store.documents.release(operator, document_id)

        return await self._document_action(
            request, act, "Only a Quarantined document can be released."
        )

    async def reindex(self, request: Request) -> Response:
        """POST /store/documents/{id}/reindex: back to Pending; needs the retained bytes."""

        async def act(store: TenantStore, operator: Operator, document_id: str) -> Any:
            return await store.documents.reindex(operator, document_id)

        return await self._document_action(
            request,
            act,
            "This document cannot be re-indexed: its original bytes were not retained, or it "
            "is being processed.",
        )

    async def delete(self, request: Request) -> Response:
        """DELETE /store/documents/{id}: soft delete; gone from search, fetch and the list."""
        document_id = request.path_params["document_id"]
        operator, store = await self._manager_and_store(
            request, lambda store, operator: store.documents.delete(operator, document_id)
        )
        self._require_ready(store)
        try:
            await store.documents.delete(operator, document_id)
        except DocumentReadOnlyError as exc:
            raise _read_only(exc) from None
        except NotPermittedError:
            raise _not_found() from None
        return Response(status_code=204)

    async def download(self, request: Request) -> Response:
        """GET /store/documents/{id}/download: the original bytes (ESRA_DATA_MANAGE only)."""
        document_id = request.path_params["document_id"]
        operator, store = await self._manager_and_store(
            request, lambda store, operator: store.documents.download(operator, document_id)
        )
        self._require_ready(store)
        try:
            title, data = await store.documents.download(operator, document_id)
        except NotPermittedError:
            raise _not_found() from None
        return Response(
            data,
            media_type="application/octet-stream",
            headers=download_headers(title),
        )

    def _require_ready(self, store: TenantStore) -> None:
        try:
            store.lifecycle.require_ready()
        except StoreNotReadyError as exc:
            raise _not_ready(exc.status) from None


def _scope(value: object, default: str) -> str:
    scope = upload_scope(value, default)
    if scope is None:
        raise AdminError(
            AdminErrorCode.ESRA_INVALID_REQUEST,
            f"'scope' must be printable text of at most {MAX_SCOPE_CHARS} characters.",
        )
    return scope
