"""Whether an audit sink accepts records now: asked before an action that changes something.

An action is audited after it happens, so a sink that refuses the record would leave the
change made and unrecorded (security.md: "the action fails rather than proceeding
unaudited"). Actions that change state — the configuration chain, the document store's
lifecycle, settings and documents — therefore ask first and do nothing while the sink says
no. A sink can still fail between the question and the record; what is then kept of the
record is the sink's to say (queued, or logged to ``esra.audit.unwritten``).
"""

from __future__ import annotations

import asyncio
import logging

from esra.core._audit.batching import AuditUnavailableError
from esra.core.ports import AuditSink

__all__ = ["ACCEPTANCE_TIMEOUT_S", "require_accepting"]

# How long the sink may take to say it accepts records: a database log answers a ping
# within this unless it is gone.
ACCEPTANCE_TIMEOUT_S = 5.0

_log = logging.getLogger(__name__)


async def require_accepting(sink: AuditSink, *, timeout_s: float = ACCEPTANCE_TIMEOUT_S) -> None:
    """Return once ``sink`` accepts records; raise ``AuditUnavailableError`` if it does not.

    A sink with a ``ping()`` (``BatchingAuditSink``: available, and its database log
    answers; ``TraceLinkedAuditSink`` forwards it) is asked, bounded by ``timeout_s``. A sink
    with nothing to reach (a logger, a list) has no ``ping()`` and always accepts.
    """
    ping = getattr(sink, "ping", None)
    if not callable(ping):
        return
    try:
        async with asyncio.timeout(timeout_s):
            await ping()
    except AuditUnavailableError:
        raise
    except Exception as exc:
        # The type only: a driver's message can name the host, the database or the user.
        _log.warning("the audit sink does not accept records: %s", type(exc).__name__)
        raise AuditUnavailableError from None
