"""The DocumentRepository contract suite run against the in-memory reference repository."""

from __future__ import annotations

from pathlib import Path

from esra.core._docstore.repository import DocumentRepository
from esra.core.testing import InMemoryDocumentRepository
from esra.core.testing.docstore_contract import DocumentRepositoryContract


class TestInMemoryRepositoryContract(DocumentRepositoryContract):
    """The reference semantics pass their own contract."""

    def make_repository(self, tmp_path: Path, *, retain_bytes: bool) -> DocumentRepository:
        """A fresh in-memory repository (``tmp_path`` is unused)."""
        return InMemoryDocumentRepository(retain_bytes=retain_bytes)
