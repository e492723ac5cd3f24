"""An in-memory ``StoreStateTable``: one table shared by the lifecycles a test builds."""

from __future__ import annotations

from esra.core._admin.memory_outbox import InMemoryAuditOutbox
from esra.core._audit.record import AuditRecord
from esra.core._docstore.lifecycle import StoreState

__all__ = ["InMemoryStoreStateTable"]


class InMemoryStoreStateTable(InMemoryAuditOutbox):
    """Each tenant's last written store state, in this process's memory, with the audit
    records written with them held until forwarded."""

    def __init__(self) -> None:
        super().__init__()
        self.states: dict[str, StoreState] = {}

    async def read_store_state(self, tenant_id: str) -> StoreState | None:
        """The state last written for ``tenant_id``."""
        return self.states.get(tenant_id)

    async def write_store_state(
        self, tenant_id: str, state: StoreState, *, audit: AuditRecord | None = None
    ) -> None:
        """Replace ``tenant_id``'s state, holding ``audit`` with it (neither when ``audit``
        cannot be held)."""
        if audit is not None:
            self.hold(audit)
        self.states[tenant_id] = state

    async def replace_store_state(
        self, tenant_id: str, expected: StoreState, state: StoreState, *, audit: AuditRecord
    ) -> bool:
        """``write_store_state`` if ``tenant_id``'s state still has ``expected``'s status and
        ``changed_at``; whether it did."""
        recorded = self.states.get(tenant_id)
        if recorded is None or (recorded.status, recorded.changed_at) != (
            expected.status,
            expected.changed_at,
        ):
            return False
        await self.write_store_state(tenant_id, state, audit=audit)
        return True
