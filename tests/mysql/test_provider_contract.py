"""The SearchProvider contract suite run against MySqlProvider on the live MariaDB / MySQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from esra.core.ports import SearchProvider
from esra.core.testing.contract import ContractDataset, SearchProviderContract
from tests.mysql.conftest import Server, create_database, drop_database, seed_contract

pytestmark = [pytest.mark.mysql, pytest.mark.integration]


class TestMySqlProviderContract(SearchProviderContract):
    """MySQL / MariaDB FULLTEXT honours every rule of the provider contract."""

    @pytest.fixture(autouse=True)
    def _database(self, server: Server) -> Iterator[None]:
        # One database per test: make_provider (a plain hook) seeds into it.
        self._server = server
        self._name = create_database(server)
        yield
        drop_database(server, self._name)

    def make_provider(self, dataset: ContractDataset, tmp_path: Path) -> SearchProvider:
        """Seed the dataset with its FULLTEXT index and open a provider over it."""
        seed_contract(self._server, self._name, dataset)
        return self._server.provider(self._name, mappings=(dataset.mapping,))
