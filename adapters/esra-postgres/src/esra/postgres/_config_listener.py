"""ConfigPublicationListener: LISTEN for the configuration store's publications.

``PostgresConfigStore`` announces every publication on ``CONFIG_NOTIFY_CHANNEL`` with the
payload ``'<schema> <tenant> <version>'``, delivered when the publishing transaction commits.
A host that listens syncs its ``ConfigFollower`` at once instead of at its next poll, so
another host's publication is served after one notification and one sync. Polling stays the
guarantee: a notification is lost while the listening connection is down, so the follower's
``run`` loop keeps its ``poll_s`` tick, and this listener reconnects after ``retry_s``.

The listening connection is the host's own (autocommit, nothing else runs on it); only the
schema in the payload is compared, never executed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

import psycopg
from psycopg import sql

from esra.postgres._config_schema import CONFIG_NOTIFY_CHANNEL, DEFAULT_CONFIG_SCHEMA

__all__ = ["ConfigPublicationListener"]

_log = logging.getLogger(__name__)


class ConfigPublicationListener:
    """Calls ``on_publication`` for each publication announced in ``schema``.

    Args:
        conninfo: the configuration database (as ``PostgresConfigStore.open`` takes it).
        on_publication: what to do on a publication (``ConfigFollower.wake``); must not block.
        schema: the configuration schema whose publications count.
        kwargs: further connection arguments.
        retry_s: how long to wait before listening again after the connection failed.
    """

    def __init__(
        self,
        conninfo: str,
        on_publication: Callable[[], None],
        *,
        schema: str = DEFAULT_CONFIG_SCHEMA,
        kwargs: Mapping[str, Any] | None = None,
        retry_s: float = 5.0,
    ) -> None:
        if not retry_s > 0:
            msg = "retry_s must be positive"
            raise ValueError(msg)
        self._conninfo = conninfo
        self._kwargs = dict(kwargs or {})
        self._on_publication = on_publication
        self._schema = schema
        self._retry_s = retry_s
        self._listening = asyncio.Event()

    @property
    def listening(self) -> asyncio.Event:
        """Set while the LISTEN is in place (a notification sent now will arrive)."""
        return self._listening

    async def run(self, stop: asyncio.Event) -> None:
        """Listen until ``stop`` is set; a failed connection is logged by type and retried."""
        while not stop.is_set():
            listening = asyncio.ensure_future(self._listen())
            stopped = asyncio.ensure_future(stop.wait())
            try:
                await asyncio.wait({listening, stopped}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                self._listening.clear()
                for task in (listening, stopped):
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await task
            if stop.is_set():
                return
            failure = listening.exception() if not listening.cancelled() else None
            _log.warning(
                "listening for configuration publications stopped (%s); polling meanwhile, "
                "listening again in %s s",
                type(failure).__name__ if failure is not None else "closed",
                self._retry_s,
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self._retry_s)

    async def _listen(self) -> None:
        # LISTEN needs autocommit whatever the caller's connect arguments say (a host's
        # state-database arguments usually carry their own autocommit key already).
        conn = await psycopg.AsyncConnection.connect(
            self._conninfo, **{**self._kwargs, "autocommit": True}
        )
        async with conn:
            await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(CONFIG_NOTIFY_CHANNEL)))
            self._listening.set()
            async for notification in conn.notifies():
                schema, _, _rest = notification.payload.partition(" ")
                if schema == self._schema:
                    self._on_publication()
