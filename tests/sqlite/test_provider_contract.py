"""The SearchProvider contract suite run against SqliteFts5Provider."""

from __future__ import annotations

from pathlib import Path

from esra.core.ports import SearchProvider
from esra.core.testing.contract import ContractDataset, SearchProviderContract
from esra.sqlite import SqliteFts5Provider
from tests.sqlite.conftest import seed_contract_database


class TestSqliteFts5ProviderContract(SearchProviderContract):
    """SQLite FTS5 honours every rule of the provider contract."""

    def make_provider(self, dataset: ContractDataset, tmp_path: Path) -> SearchProvider:
        """Seed the dataset into a database file with its FTS5 index and open it read-only."""
        path = seed_contract_database(tmp_path / "contract.db", dataset)
        return SqliteFts5Provider(path, mappings=(dataset.mapping,))
