"""A connector-owned document in the Portal: owner shown, no action forms, reason stated."""

from __future__ import annotations

import hashlib
from pathlib import Path

from esra.core._docstore.formats import DocumentFormat
from esra.core._docstore.model import DocumentState
from esra.core._docstore.ownership import DocumentOwner
from esra.core._docstore.upload import AcceptedUpload
from tests.starlette.portal._site import (
    INJECTION,
    Site,
    csrf_of,
    http,
    manager_token,
    open_site,
    sign_in,
)

TENANT = "larkspur"
CONNECTOR = DocumentOwner.by_connector("sharepoint-hr")


async def _synced(site: Site, name: str, body: bytes) -> str:
    """Store a document as the coming sync connector will: through the repository."""
    upload = AcceptedUpload(
        display_name=name,
        format=DocumentFormat.TXT,
        data=body,
        sha256=hashlib.sha256(body).hexdigest(),
    )
    stored = await site.store.repository.add(
        TENANT, upload, scope=site.store.default_scope, now=site.clock.now(), owner=CONNECTOR
    )
    return stored.id


async def test_a_connector_document_is_rendered_read_only(tmp_path: Path) -> None:
    """The review page names the connector and offers no release, re-index or delete form."""
    async with open_site(tmp_path) as site, http(site) as client:
        held = await _synced(site, "synced-notes.txt", INJECTION)
        mine = await site.upload("mine.txt", b"Uploaded by hand.\n")
        await site.ingest()
        await sign_in(client, manager_token())

        listed = await client.get("/portal/documents")
        assert "Read-only:</strong> kept in sync by the connector sharepoint-hr" in listed.text

        page = await client.get(f"/portal/documents/{held}")
        assert page.status_code == 200
        assert "Connector sharepoint-hr (read-only here)" in page.text
        assert "owned by the connector &#x27;sharepoint-hr&#x27;" in page.text
        for action in ("release", "reindex", "delete"):
            assert f'action="/portal/documents/{held}/{action}"' not in page.text
        assert f"/portal/documents/{held}/download" in page.text  # reading is not a change

        own = await client.get(f"/portal/documents/{mine}")
        assert "<dd>Uploaded</dd>" in own.text
        assert f'action="/portal/documents/{mine}/delete"' in own.text

        # Posting the form anyway (a stale page, a hand-made request) is refused with why.
        refused = await client.post(
            f"/portal/documents/{held}/release", data={"csrf": csrf_of(own)}
        )
        assert refused.status_code == 409
        assert "Read-only document" in refused.text
        assert "sharepoint-hr" in refused.text
        document = await site.store.repository.get(TENANT, held)
        assert document is not None
        assert document.state is DocumentState.QUARANTINED
