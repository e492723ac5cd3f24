"""The triple-control tests of ``tests/core/admin/test_chain.py``, on ``SqliteConfigStore``.

The same test bodies run here with every harness's workspaces, history and publications in
a fresh SQLite file, so each link, each denial and each conflict is proved on durable state.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from esra.sqlite._config_store import SqliteConfigStore
from tests.core.admin import test_chain
from tests.core.admin.test_chain import Admin, AdminFactory

globals().update(
    {name: value for name, value in vars(test_chain).items() if name.startswith("test_")}
)


@pytest.fixture
async def make_admin(tmp_path: Path) -> AsyncIterator[AdminFactory]:
    """Harnesses over fresh SQLite stores, each in its own file; all closed afterwards."""
    stores: list[SqliteConfigStore] = []

    async def make() -> Admin:
        store = SqliteConfigStore(tmp_path / f"config-{len(stores)}.db")
        stores.append(store)
        return Admin(store=store)

    yield make
    for store in stores:
        await store.close()
