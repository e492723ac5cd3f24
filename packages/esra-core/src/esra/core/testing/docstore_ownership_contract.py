"""Document ownership's share of the ``DocumentRepository`` contract, and the v1 migration.

``DocumentRepositoryContract`` inherits these tests, so every repository proves them: an
upload is owned ``uploaded`` by default, a connector-owned document keeps its owner through
every read and through extraction, and the owner is never another document's.

A repository over a persisted schema also proves that a store written before owners
existed (schema version 1) migrates in place with its documents intact: it implements
``make_migrated_repository``, which seeds a version-1 store with ``VersionOneDocument`` using
version 1's own DDL, migrates it and opens a repository over it. The in-memory repository
has no schema, so that test skips for it.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Awaitable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import attrs
import pytest

from esra.core._docstore.formats import DocumentFormat
from esra.core._docstore.model import DocumentState, IndexedContent, StoredSegment
from esra.core._docstore.ownership import UPLOADED, DocumentOwner, OwnerKind
from esra.core._docstore.refusals import DocumentRefusedError
from esra.core._docstore.repository import DocumentRepository
from esra.core._docstore.upload import AcceptedUpload
from esra.core.codes import DocumentRefusal

__all__ = ["DocumentOwnershipContract", "VersionOneDocument"]

_T0 = datetime(2026, 5, 1, 8, 0, tzinfo=UTC)
_TENANT = "owner-tenant"
_CONNECTOR = DocumentOwner.by_connector("sharepoint-hr")


def _at(seconds: float) -> datetime:
    return _T0 + timedelta(seconds=seconds)


def _upload(name: str, body: str) -> AcceptedUpload:
    data = body.encode()
    return AcceptedUpload(
        display_name=name,
        format=DocumentFormat.TXT,
        data=data,
        sha256=hashlib.sha256(data).hexdigest(),
    )


@attrs.frozen
class VersionOneDocument:
    """One Indexed document with one segment, as a version-1 store held it (no owner yet).

    ``make_migrated_repository`` writes exactly these values with version 1's columns:
    state ``indexed``, ``attempts`` 1, ``segment_count`` 1, ``findings`` empty, the bytes
    retained, one segment (ordinal 0, label ``segment_label``, body and indexed text
    ``text``), created and updated at ``created_at``.
    """

    id: str = "legacy-0001"
    tenant_id: str = _TENANT
    title: str = "legacy-handbook.txt"
    scope: str = "all"
    text: str = "Leave policy: twenty-eight days of paid leave.\n"
    segment_label: str = "part 1"
    revision: int = 1
    created_at: datetime = datetime(2025, 12, 1, 9, 30, tzinfo=UTC)

    @property
    def data(self) -> bytes:
        """The original bytes (the text, encoded)."""
        return self.text.encode()

    @property
    def sha256(self) -> str:
        """The content hash of ``data``."""
        return hashlib.sha256(self.data).hexdigest()


@pytest.mark.asyncio
class DocumentOwnershipContract:
    """Owner round-trips (every repository) and the version-1 migration (persisted ones)."""

    def make_migrated_repository(
        self, tmp_path: Path, legacy: VersionOneDocument
    ) -> DocumentRepository | Awaitable[DocumentRepository]:
        """Seed a version-1 store with ``legacy``, migrate it, and open a repository on it.

        The repository is closed with ``close_repository``. Raise ``NotImplementedError``
        (the default) for a repository with no persisted schema.
        """
        raise NotImplementedError

    def close_repository(self, repository: DocumentRepository) -> Awaitable[None] | None:
        """Release what ``make_migrated_repository`` opened (``DocumentRepositoryContract``'s)."""
        raise NotImplementedError

    async def test_an_upload_is_owned_as_uploaded(self, repository: DocumentRepository) -> None:
        """The default owner is ``uploaded``, through add, get and list."""
        added = await repository.add(
            _TENANT, _upload("plain.txt", "Uploaded by hand."), scope="all", now=_at(0)
        )
        assert added.owner == UPLOADED
        assert not added.owner.read_only
        stored = await repository.get(_TENANT, added.id)
        assert stored is not None
        assert stored.owner == UPLOADED
        assert [d.owner for d in await repository.list(_TENANT)] == [UPLOADED]

    async def test_a_connector_owned_document_keeps_its_owner(
        self, repository: DocumentRepository
    ) -> None:
        """The connector's name round-trips through add, get, list and extraction."""
        owned = await repository.add(
            _TENANT,
            _upload("synced.txt", "Kept in sync."),
            scope="all",
            now=_at(0),
            owner=_CONNECTOR,
        )
        uploaded = await repository.add(
            _TENANT, _upload("mine.txt", "Mine."), scope="all", now=_at(1)
        )
        assert owned.owner == _CONNECTOR
        assert owned.owner.kind is OwnerKind.CONNECTOR
        assert owned.owner.connector == "sharepoint-hr"
        owners = {d.id: d.owner for d in await repository.list(_TENANT)}
        assert owners == {owned.id: _CONNECTOR, uploaded.id: UPLOADED}
        claims = await repository.claim(
            _TENANT, worker_id="w", limit=1, lease_s=60.0, max_attempts=3, now=_at(2)
        )
        assert [c.document_id for c in claims] == [owned.id]
        segment = StoredSegment(ordinal=0, label="part 1", body="Kept.", indexed="Kept.")
        content = IndexedContent(
            text="Kept.", segments=(segment,), findings=(), state=DocumentState.INDEXED
        )
        assert await repository.complete(claims[0], content, now=_at(3))
        after = await repository.get(_TENANT, owned.id)
        assert after is not None
        assert after.state is DocumentState.INDEXED
        assert after.owner == _CONNECTOR

    async def test_a_version_1_store_migrates_keeping_its_documents(self, tmp_path: Path) -> None:
        """Rows stored before owners existed read back intact, owned ``uploaded``."""
        legacy = VersionOneDocument()
        try:
            made = self.make_migrated_repository(tmp_path, legacy)
        except NotImplementedError:
            pytest.skip("this repository has no persisted schema to migrate")
        repository = await made if inspect.isawaitable(made) else made
        try:
            await self._check_migrated(repository, legacy)
        finally:
            closing = self.close_repository(repository)
            if inspect.isawaitable(closing):
                await closing

    @staticmethod
    async def _check_migrated(repository: DocumentRepository, legacy: VersionOneDocument) -> None:
        stored = await repository.get(legacy.tenant_id, legacy.id)
        assert stored is not None
        assert (stored.title, stored.scope, stored.sha256, stored.size) == (
            legacy.title,
            legacy.scope,
            legacy.sha256,
            len(legacy.data),
        )
        assert (stored.state, stored.attempts, stored.revision, stored.segment_count) == (
            DocumentState.INDEXED,
            1,
            legacy.revision,
            1,
        )
        assert stored.created_at == legacy.created_at
        assert stored.bytes_retained
        assert not stored.deleted
        assert stored.owner == UPLOADED
        assert [d.id for d in await repository.list(legacy.tenant_id)] == [legacy.id]
        text = await repository.text(legacy.tenant_id, legacy.id, scopes={legacy.scope})
        assert text == legacy.text
        assert await repository.original(legacy.tenant_id, legacy.id) == legacy.data
        # The unique content hash survived the migration: re-uploading is still refused.
        with pytest.raises(DocumentRefusedError) as refused:
            await repository.add(
                legacy.tenant_id,
                AcceptedUpload(
                    display_name="again.txt",
                    format=DocumentFormat.TXT,
                    data=legacy.data,
                    sha256=legacy.sha256,
                ),
                scope="all",
                now=_at(0),
            )
        assert refused.value.refusal is DocumentRefusal.DUPLICATE_DOCUMENT
        # The migrated store takes new documents of either owner.
        synced = await repository.add(
            legacy.tenant_id, _upload("new.txt", "New."), scope="all", now=_at(1), owner=_CONNECTOR
        )
        again = await repository.get(legacy.tenant_id, synced.id)
        assert again is not None
        assert again.owner == _CONNECTOR
