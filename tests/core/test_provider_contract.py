"""The SearchProvider contract suite run against the in-memory fake provider."""

from __future__ import annotations

from pathlib import Path

from esra.core.ports import SearchProvider
from esra.core.testing import InMemorySearchProvider
from esra.core.testing.contract import ContractDataset, SearchProviderContract


class TestInMemoryProviderContract(SearchProviderContract):
    """The fake honours the same contract as the real providers."""

    # The fake keeps rows per mapping id and has no catalog: an unknown mapping is just empty.
    classifies_missing_relation = False

    def make_provider(self, dataset: ContractDataset, tmp_path: Path) -> SearchProvider:
        """Hold the standard rows in memory under the contract mapping's id."""
        return InMemorySearchProvider({dataset.mapping.id: dataset.rows})
