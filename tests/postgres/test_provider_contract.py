"""The SearchProvider contract suite run against PostgresProvider on a live server."""

from __future__ import annotations

from pathlib import Path

import pytest

from esra.core.ports import SearchProvider
from esra.core.testing.contract import (
    ContractDataset,
    SearchProviderContract,
)
from tests.postgres.conftest import make_provider, seed_contract

pytestmark = [pytest.mark.postgres, pytest.mark.integration]


class TestPostgresProviderContract(SearchProviderContract):
    """PostgreSQL tsvector search honours every rule of the provider contract."""

    @pytest.fixture(autouse=True)
    def _server(self, pg_dsn: str, pg_schema: str) -> None:
        self.dsn, self.schema = pg_dsn, pg_schema

    def make_provider(self, dataset: ContractDataset, tmp_path: Path) -> SearchProvider:
        """Seed the dataset into the test's schema and return a provider searching it."""
        seed_contract(self.dsn, self.schema, dataset)
        return make_provider(self.dsn, self.schema, mappings=(dataset.mapping,))
