"""The admin chain's harness, in memory: every test's ``make_admin`` opens a fresh one."""

from __future__ import annotations

import pytest

from tests.core.admin.test_chain import Admin, AdminFactory


@pytest.fixture
def make_admin() -> AdminFactory:
    """Harnesses over fresh ``InMemoryWorkspaceStore``s."""

    async def make() -> Admin:
        return Admin()

    return make
