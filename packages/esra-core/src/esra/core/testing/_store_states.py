"""An in-memory ``StoreStateTable``: one table shared by the lifecycles a test builds."""

from __future__ import annotations

from esra.core._docstore.lifecycle import StoreState

__all__ = ["InMemoryStoreStateTable"]


class InMemoryStoreStateTable:
    """Each tenant's last written store state, in this process's memory."""

    def __init__(self) -> None:
        self.states: dict[str, StoreState] = {}

    async def read_store_state(self, tenant_id: str) -> StoreState | None:
        """The state last written for ``tenant_id``."""
        return self.states.get(tenant_id)

    async def write_store_state(self, tenant_id: str, state: StoreState) -> None:
        """Replace ``tenant_id``'s state."""
        self.states[tenant_id] = state
