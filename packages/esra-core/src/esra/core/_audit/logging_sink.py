"""LoggingAuditSink: audit records as JSON lines on a standard ``logging`` logger."""

from __future__ import annotations

import json
import logging

from esra.core._audit.codec import record_document
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
        # record_document: standard JSON (no bare NaN, no surrogate escape) that a log
        # pipeline parses, as every other sink writes it.
        self._logger.info(json.dumps(record_document(record), sort_keys=True, default=str))
