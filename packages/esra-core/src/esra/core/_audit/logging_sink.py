"""LoggingAuditSink: audit records as JSON lines on a standard ``logging`` logger."""

from __future__ import annotations

import json
import logging

from esra.core._audit.record import AuditRecord

__all__ = ["LoggingAuditSink"]


class LoggingAuditSink:
    """Writes each record as one JSON object to the ``esra.audit`` logger (or another).

    The host decides where that logger goes; records never hold prompts, claim values, SQL or
    driver text, so the line is safe for an ordinary log pipeline.
    """

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self._logger = logger or logging.getLogger("esra.audit")

    async def record(self, record: AuditRecord) -> None:
        """Log ``record`` at INFO as a JSON line."""
        document = {
            "event": record.event.value,
            "tenant_id": record.tenant_id,
            "correlation_id": record.correlation_id,
            "at": record.at.isoformat(),
            "outcome": record.outcome,
            "reason": record.reason,
            "dimensions": dict(record.dimensions),
        }
        self._logger.info(json.dumps(document, sort_keys=True, default=str))
