"""The upload form: each file's own outcome, managers only, CSRF-checked and bounded."""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path

import httpx2
import pytest

from esra.core._docstore.model import DocumentState
from esra.core.codes import AuditEvent
from esra.starlette._portal import upload_pages
from tests.starlette.portal._site import (
    INJECTION,
    csrf_of,
    http,
    manager_token,
    open_site,
    reader_token,
    sign_in,
)

# An OLE compound file header: what a legacy Word .doc starts with.
LEGACY_DOC = bytes.fromhex("d0cf11e0a1b11ae1") + bytes(504)
POLICY = b"# Travel policy\n\nBook travel two weeks ahead.\n"


async def _upload(
    client: httpx2.AsyncClient, files: list[tuple[str, bytes]], **fields: str
) -> httpx2.Response:
    form = await client.get("/portal/upload")
    return await client.post(
        "/portal/upload",
        data={"csrf": csrf_of(form), **fields},
        files=[("files", (name, data, "application/octet-stream")) for name, data in files],
    )


def _rows(page: httpx2.Response) -> dict[str, str]:
    return dict(re.findall(r'<tr><th scope="row">([^<]+)</th>(.*?)</tr>', page.text, re.DOTALL))


async def test_each_file_gets_its_own_outcome(tmp_path: Path) -> None:
    """Three files, one refused: two stored as Pending, the .doc refused with its remedy."""
    async with open_site(tmp_path) as site, http(site) as client:
        await sign_in(client, manager_token())
        form = await client.get("/portal/upload")
        assert '<label for="files">' in form.text
        assert 'value="general"' in form.text  # the store's default scope
        result = await _upload(
            client,
            [("travel.md", POLICY), ("minutes.doc", LEGACY_DOC), ("notes.txt", INJECTION)],
            scope="hr",
        )
        assert result.status_code == 200
        assert "3 files: 2 stored, 1 refused." in result.text
        rows = _rows(result)
        assert "Stored" in rows["travel.md"]
        assert ">Pending</span>" in rows["travel.md"]
        assert "<code>LEGACY_DOC</code>" in rows["minutes.doc"]
        assert "convert to .docx and retry" in rows["minutes.doc"]
        assert "Stored" in rows["notes.txt"]
        counts = await site.store.repository.counts("larkspur")
        assert counts[DocumentState.PENDING] == 2
        stored = await site.store.repository.list("larkspur")
        assert {d.scope for d in stored} == {"hr"}
        uploads = site.audit.events(AuditEvent.DOCUMENT_UPLOAD)
        assert [r.outcome for r in uploads] == ["ok", "denied", "ok"]


async def test_a_duplicate_names_the_document_it_repeats(tmp_path: Path) -> None:
    """Uploading the same content again is refused, naming the stored document."""
    async with open_site(tmp_path) as site, http(site) as client:
        await sign_in(client, manager_token())
        await _upload(client, [("travel.md", POLICY)])
        again = await _upload(client, [("travel copy.md", POLICY)])
        row = _rows(again)["travel copy.md"]
        assert "<code>DUPLICATE_DOCUMENT</code>" in row
        assert "already stored as &#x27;travel.md&#x27;" in row


async def test_upload_without_files_or_with_a_bad_scope_shows_the_form_again(
    tmp_path: Path,
) -> None:
    """No file chosen, or an unusable scope: the form comes back (400) saying what to fix."""
    async with open_site(tmp_path) as site, http(site) as client:
        await sign_in(client, manager_token())
        empty = await _upload(client, [("", b"")])
        assert empty.status_code == 400
        assert "Choose at least one file" in empty.text
        bad_scope = await _upload(client, [("travel.md", POLICY)], scope="x" * 200)
        assert bad_scope.status_code == 400
        assert "security scope must be printable" in bad_scope.text
        assert await site.store.repository.list("larkspur") == []


async def test_upload_needs_csrf_and_the_manage_role(tmp_path: Path) -> None:
    """A forged upload is 403; a reader's upload is 403 and audited as a denial."""
    async with open_site(tmp_path) as site:
        async with http(site) as manager:
            await sign_in(manager, manager_token())
            forged = await manager.post(
                "/portal/upload",
                data={"csrf": "forged"},
                files=[("files", ("travel.md", POLICY, "text/markdown"))],
            )
            assert forged.status_code == 403
        async with http(site) as reader:
            await sign_in(reader, reader_token())
            page = await reader.get("/portal/documents")
            refused = await reader.post(
                "/portal/upload",
                data={"csrf": csrf_of(page)},
                files=[("files", ("travel.md", POLICY, "text/markdown"))],
            )
            assert refused.status_code == 403
        assert await site.store.repository.list("larkspur") == []
        (denial,) = site.audit.events(AuditEvent.DOCUMENT_UPLOAD)
        assert (denial.outcome, denial.dimensions["operator"]) == ("denied", "rafael")


async def test_an_upload_over_the_limit_is_refused_before_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A body declaring more than the upload limit is refused with 413."""
    monkeypatch.setattr(upload_pages, "MAX_UPLOAD_BYTES", 1024)
    async with open_site(tmp_path) as site, http(site) as client:
        await sign_in(client, manager_token())
        response = await _upload(client, [("big.txt", b"words " * 1000)])
        assert response.status_code == 413
        assert await site.store.repository.list("larkspur") == []


BIDI_STORED = "invoice\u202efdp.md"  # reads as "invoicedm.pdf" where the override applies
BIDI_REFUSED = "min\u200butes\u2066\u202e.doc"


async def test_the_result_page_shows_sanitised_names_never_the_submitted_ones(
    tmp_path: Path,
) -> None:
    """Issue 13 item 10: a submitted name with U+202E (and other format characters) was
    echoed on the result page; each row now shows the sanitised title instead."""
    async with open_site(tmp_path) as site, http(site) as client:
        await sign_in(client, manager_token())
        result = await _upload(client, [(BIDI_STORED, POLICY), (BIDI_REFUSED, LEGACY_DOC)])
        assert result.status_code == 200
        for character in ("\u202e", "\u200b", "\u2066"):
            assert character not in result.text
        rows = _rows(result)
        assert set(rows) == {"invoicefdp.md", "minutes.doc"}
        assert "Stored" in rows["invoicefdp.md"]
        assert "<code>LEGACY_DOC</code>" in rows["minutes.doc"]
        (stored,) = await site.store.repository.list("larkspur")
        assert stored.title == "invoicefdp.md"


def _bomb() -> bytes:
    """A Word package with a part that compresses 2000:1: a zip bomb's signature."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", b"<Types/>")
        archive.writestr("word/document.xml", b"<w:document/>")
        archive.writestr("word/media/zeros.bin", b"\x00" * 2_000_000)
    return buffer.getvalue()


async def test_a_breach_is_reported_stored_as_failed_with_its_remedy(tmp_path: Path) -> None:
    """The result row links the Failed document and names the limit's remedy; its page shows
    the safety limit and who uploaded it; the search form filters by uploader."""
    async with open_site(tmp_path) as site, http(site) as client:
        await sign_in(client, manager_token())
        result = await _upload(client, [("bomb.docx", _bomb()), ("travel.md", POLICY)])
        assert "2 files: 1 stored, 1 stored as failed, 0 refused." in result.text
        row = _rows(result)["bomb.docx"]
        assert "Stored as failed" in row
        assert "<code>MALFORMED_DOCUMENT</code>" in row
        assert "compression ratio" in row
        (document,) = await site.store.repository.list("larkspur", states={DocumentState.FAILED})
        page = await client.get(f"/portal/documents/{document.id}")
        assert "<code>zip_compression_ratio</code>" in page.text
        assert document.uploaded_by is not None
        assert f"<dd>{document.uploaded_by}</dd>" in page.text
        listing = await client.get("/portal/documents", params={"uploader": document.uploaded_by})
        assert 'name="uploader"' in listing.text
        assert listing.text.count("bomb.docx") >= 1
        assert "travel.md" in listing.text
        nobody = await client.get("/portal/documents", params={"uploader": "nobody"})
        assert "bomb.docx" not in nobody.text
