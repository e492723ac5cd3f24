"""Initialising a document store on a command-line user's behalf, as an audited action.

A store is initialised by an explicit, audited administrative action, never as a side effect
of first use: the embedded default's store starts Disabled like a configured one. When a
command initialises one for its user (``esra ingest`` into the embedded default's store),
it takes exactly the action an administrator takes in the portal — ``StoreLifecycle``'s
enable, then initialise — as the operator ``cli:<OS user>`` holding ``ESRA_DATA_MANAGE``,
records both in the host's audit sink (``esra.store.enable``, ``esra.store.initialise``
with that subject, read back by ``esra audit``), and says so on stderr first.

The subject is the process's OS account, looked up by uid rather than read from ``$USER``,
which any caller sets at will. That account already owns the data directory the command
writes, so holding the role adds no power it lacks; the record names who took the action.
"""

from __future__ import annotations

import getpass
import os
from typing import TextIO

import attrs

from esra.core.admin import Role
from esra.core.codes import AuditEvent
from esra.core.docstore import OpenedStore, Operator, StoreLifecycle, StoreStatus
from esra.core.ports import AuditSink, Clock
from esra.starlette._worker import StoreUnavailableError

__all__ = ["CLI_SUBJECT_PREFIX", "CliStoreInitialisation", "cli_operator", "cli_subject"]

CLI_SUBJECT_PREFIX = "cli:"


def _os_user() -> str:
    try:
        import pwd  # noqa: PLC0415 - POSIX only

        return pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError):
        # No pwd module (Windows) or a uid without a passwd entry (some containers).
        try:
            return getpass.getuser()
        except (OSError, KeyError):
            return f"uid-{os.getuid()}" if hasattr(os, "getuid") else "unknown"


def cli_subject() -> str:
    """``cli:<OS user>``: who a command acts as in the audit log."""
    return f"{CLI_SUBJECT_PREFIX}{_os_user()}"


def cli_operator(tenant_id: str, *, subject: str | None = None) -> Operator:
    """The command-line user as an operator managing ``tenant_id``'s store."""
    return Operator(
        subject=subject or cli_subject(),
        tenant_id=tenant_id,
        roles=frozenset({Role.ESRA_DATA_MANAGE.value}),
    )


@attrs.frozen
class CliStoreInitialisation:
    """Initialise an uninitialised store through its audited lifecycle as ``operator``.

    Attributes:
        operator: who the action is recorded against (:func:`cli_operator`).
        audit: the host's audit sink (``Runtime.audit``: the embedded default's
            ``state.db``), so ``esra audit`` shows the records.
        clock: time for the records.
        err: where the command says what it does on the user's behalf.
        what: how the message names the store.
    """

    operator: Operator
    audit: AuditSink = attrs.field(repr=False)
    clock: Clock = attrs.field(repr=False)
    err: TextIO = attrs.field(repr=False)
    what: str = "the document store"

    async def __call__(self, store: OpenedStore) -> bool:
        """Initialise ``store`` unless it holds its schema; return whether it did.

        Raises:
            StoreUnavailableError: initialisation failed (its reason and remedy), recorded
                as a failed ``esra.store.initialise``.
        """
        if await store.schema_present():
            return False
        subject = self.operator.subject
        self.err.write(
            f"initialising {self.what} {store.location} (audited as "
            f"{AuditEvent.STORE_ENABLE.value} and {AuditEvent.STORE_INITIALISE.value} "
            f"by {subject})\n"
        )
        self.err.flush()
        lifecycle = StoreLifecycle(
            self.operator.tenant_id,
            store.initialise,
            audit=self.audit,
            clock=self.clock,
            status=StoreStatus.DISABLED,
        )
        await lifecycle.enable(self.operator)
        await lifecycle.initialise(self.operator)
        state = await lifecycle.wait()
        if state.status is not StoreStatus.READY:
            msg = (
                f"cannot initialise the document store {store.location}: {state.failure}: "
                f"{state.remedy}"
            )
            raise StoreUnavailableError(msg)
        return True
