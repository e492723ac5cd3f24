"""Store settings' share of the ``DocumentRepository`` contract.

``DocumentRepositoryContract`` inherits these tests, so every repository proves them: no
settings until some are saved; each save names the revision it was made against and of two
saves against the same revision exactly one is stored; settings are per tenant; and a
document completed with ``retain_bytes`` False loses its original bytes.
"""

from __future__ import annotations

import asyncio
import hashlib
from datetime import UTC, datetime, timedelta

import pytest

from esra.core._docstore.formats import DocumentFormat
from esra.core._docstore.model import DocumentState, IndexedContent, StoredSegment
from esra.core._docstore.repository import DocumentRepository
from esra.core._docstore.scanner import ScanPolicy
from esra.core._docstore.store_configuration import ConfigurableSettings
from esra.core._docstore.upload import AcceptedUpload

__all__ = ["StoreConfigurationContract"]

_T0 = datetime(2026, 7, 1, 8, 0, tzinfo=UTC)
_TENANT = "settings-tenant"
_OTHER = "settings-other"
_REJECT = ConfigurableSettings(
    scan_policy=ScanPolicy.REJECT, retain_bytes=False, max_attempts=7, batch_per_tenant=5
)


def _at(seconds: float) -> datetime:
    return _T0 + timedelta(seconds=seconds)


@pytest.mark.asyncio
class StoreConfigurationContract:
    """Settings persistence with optimistic revisions, and the per-document retention."""

    async def test_settings_round_trip_with_revision_and_author(
        self, repository: DocumentRepository
    ) -> None:
        """None until saved; the first save is revision 1, read back exactly."""
        assert await repository.load_configuration(_TENANT) is None
        saved = await repository.save_configuration(
            _TENANT, _REJECT, expected_revision=0, by="manager@example.com", now=_at(0)
        )
        assert saved is not None
        assert (saved.revision, saved.updated_by) == (1, "manager@example.com")
        loaded = await repository.load_configuration(_TENANT)
        assert loaded is not None
        assert loaded.settings == _REJECT
        assert (loaded.revision, loaded.updated_by) == (1, "manager@example.com")
        assert loaded.updated_at is not None
        assert loaded.updated_at.astimezone(UTC) == _at(0)
        assert await repository.load_configuration(_OTHER) is None

    async def test_a_save_against_a_stale_revision_changes_nothing(
        self, repository: DocumentRepository
    ) -> None:
        """Revision 0 twice, or a revision that moved on: None, and the stored row stands."""
        first = ConfigurableSettings(max_attempts=4)
        assert await repository.save_configuration(
            _TENANT, first, expected_revision=0, by="a", now=_at(0)
        )
        assert (
            await repository.save_configuration(
                _TENANT, _REJECT, expected_revision=0, by="b", now=_at(1)
            )
            is None
        )
        assert (
            await repository.save_configuration(
                _TENANT, _REJECT, expected_revision=2, by="b", now=_at(1)
            )
            is None
        )
        second = await repository.save_configuration(
            _TENANT, _REJECT, expected_revision=1, by="b", now=_at(2)
        )
        assert second is not None
        assert second.revision == 2
        loaded = await repository.load_configuration(_TENANT)
        assert loaded is not None
        assert (loaded.settings, loaded.revision, loaded.updated_by) == (_REJECT, 2, "b")

    async def test_of_concurrent_saves_against_one_revision_exactly_one_wins(
        self, repository: DocumentRepository
    ) -> None:
        """Two operators who read revision 1 both save: one is stored, one is told no."""
        await repository.save_configuration(
            _TENANT, ConfigurableSettings(), expected_revision=0, by="a", now=_at(0)
        )
        results = await asyncio.gather(
            *(
                repository.save_configuration(
                    _TENANT,
                    ConfigurableSettings(max_attempts=attempts),
                    expected_revision=1,
                    by=f"op{attempts}",
                    now=_at(1),
                )
                for attempts in range(2, 8)
            )
        )
        stored = [r for r in results if r is not None]
        assert len(stored) == 1
        loaded = await repository.load_configuration(_TENANT)
        assert loaded is not None
        assert (loaded.revision, loaded.settings) == (2, stored[0].settings)

    async def test_content_completed_without_retention_drops_the_bytes(
        self, repository: DocumentRepository
    ) -> None:
        """The tenant's ``retain_bytes`` False, passed with the content, drops the original."""
        for name, retain in (("kept.txt", True), ("dropped.txt", False)):
            data = f"The body of {name}.".encode()
            upload = AcceptedUpload(
                display_name=name,
                format=DocumentFormat.TXT,
                data=data,
                sha256=hashlib.sha256(data).hexdigest(),
            )
            document = await repository.add(_TENANT, upload, scope="all", now=_at(0))
            (claim,) = await repository.claim(
                _TENANT, worker_id="w", limit=1, lease_s=60.0, max_attempts=3, now=_at(1)
            )
            body = data.decode()
            content = IndexedContent(
                text=body,
                segments=(StoredSegment(ordinal=0, label="", body=body, indexed=body),),
                findings=(),
                state=DocumentState.INDEXED,
                retain_bytes=retain,
            )
            assert await repository.complete(claim, content, now=_at(2))
            stored = await repository.get(_TENANT, document.id)
            assert stored is not None
            assert stored.bytes_retained is retain
            assert (await repository.original(_TENANT, document.id) is not None) is retain
            assert await repository.text(_TENANT, document.id, scopes={"all"}) == body
