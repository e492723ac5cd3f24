"""The ``WorkspaceStore`` contract suite against ``InMemoryWorkspaceStore``."""

from __future__ import annotations

from pathlib import Path

from esra.core.admin import InMemoryWorkspaceStore, WorkspaceStore
from esra.core.testing.config_contract import WorkspaceStoreContract


class TestInMemoryWorkspaceStoreContract(WorkspaceStoreContract):
    """Every rule of the port, in memory; a twin is the same object (one process)."""

    def make_store(self, tmp_path: Path) -> WorkspaceStore:
        del tmp_path
        return InMemoryWorkspaceStore()

    def open_twin(self, store: WorkspaceStore) -> WorkspaceStore:
        return store
