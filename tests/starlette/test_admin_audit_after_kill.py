"""An administrative change killed (``kill -9``) before its audit record was written is
still audited: the record was saved with the change and is delivered on the next start.

The chain used to save a change to the state database and only then hand its record to the
audit sink. A process killed in between (here: by the sink itself, at the exact moment it is
handed the record) left the change applied — a secret written, the workspace at its next
version — and no audit record anywhere.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from esra.core import SystemClock
from esra.core.audit import AuditQuery
from esra.core.codes import AuditEvent
from esra.starlette._durable_state import embedded_state, open_state

pytestmark = pytest.mark.integration

TENANT = "acme"
REFERENCE = "secret://claims-db"

# One process: opens the embedded state, writes a connection secret through the chain, and
# is killed with SIGKILL the moment its audit sink is handed the change's record.
_CHILD = f"""
import asyncio, contextlib, os, signal, sys
from pathlib import Path

from esra.core import SystemClock
from esra.core.admin import Administrator, ConnectionSecretService, Grant, Role
from esra.starlette._durable_state import embedded_state, open_state


class KilledOnRecord:
    async def record(self, record):
        os.kill(os.getpid(), signal.SIGKILL)


async def main(data_dir):
    sink = KilledOnRecord()
    async with contextlib.AsyncExitStack() as stack:
        durable = await open_state(
            stack, embedded_state(data_dir), policies={{}}, clock=SystemClock(), audit=sink
        )
        service = ConnectionSecretService(
            durable.workspaces, durable.secrets, audit=sink, clock=SystemClock()
        )
        admin = Administrator.of("sec", Grant(Role.SECURITY_MANAGE, {TENANT!r}))
        await service.put_secret(admin, {TENANT!r}, {REFERENCE!r}, "pw-never-in-config")


asyncio.run(main(Path(sys.argv[1])))
"""


def _killed_mid_change(data_dir: Path) -> None:
    child = subprocess.run(  # noqa: S603 - our own interpreter and script
        [sys.executable, "-c", _CHILD, str(data_dir)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert child.returncode == -signal.SIGKILL, child.stderr


async def test_a_change_killed_before_its_audit_record_is_audited_on_the_next_start(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    _killed_mid_change(data_dir)

    for _start in range(2):  # the second start finds nothing left to deliver
        async with contextlib.AsyncExitStack() as stack:
            durable = await open_state(
                stack, embedded_state(data_dir), policies={}, clock=SystemClock()
            )
            assert durable.workspaces is not None
            assert durable.audit_reader is not None
            workspace = await durable.workspaces.load(TENANT)
            assert workspace is not None
            assert dict(workspace.secret_rotations) == {REFERENCE: 1}  # the change applied
            assert await durable.secrets.resolve(TENANT, REFERENCE) == "pw-never-in-config"
            page = await durable.audit_reader.query(
                AuditQuery(tenant_id=TENANT, events=frozenset({AuditEvent.ADMIN_SECRET_WRITE}))
            )
            assert [(r.outcome, r.dimensions["version"]) for r in page.records] == [("ok", 1)]
            assert await durable.workspaces.pending_audit() == []
