"""``/readyz``: whether this host can do its work now, not merely whether it is alive.

``/healthz`` answers as long as the process serves HTTP; ``/readyz`` also asks the parts a
call or an administrator's action cannot do without, each bounded by
:data:`READINESS_TIMEOUT_S` and all at once:

- ``config_database``: the ``[state]`` database the configuration lives in (the admin
  API's workspace store); absent when the host keeps no state database;
- ``document_stores``: every tenant document store that is Ready (a disabled or
  initialising store is an administrator's step away, not this host failing); present
  whenever a store is configured;
- ``audit``: the audit sink — it accepts records, and its database log answers; absent
  for a sink with nothing to reach (the ``esra.audit`` logger).

The answer is 200 ``{"status": "ready", "checks": {name: "ok"}}``, or 503 with
``"status": "not_ready"`` and each failing check's classified word: ``timeout`` (no answer
within the bound) or ``unavailable`` (it answered with an error). Never an exception's
text, a tenant id or a DSN: the log gets the check's name and the exception's type only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol, runtime_checkable

import attrs
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from esra.core.docstore import StoreStatus
from esra.starlette._stores import TenantStore

__all__ = [
    "READINESS_TIMEOUT_S",
    "Pingable",
    "ReadinessCheck",
    "host_checks",
    "readiness_endpoint",
    "run_check",
]

# Each check's bound. Checks run concurrently, so a probe answers within about this long;
# a Kubernetes readiness probe's timeoutSeconds should exceed it.
READINESS_TIMEOUT_S = 2.0
_log = logging.getLogger(__name__)


@runtime_checkable
class Pingable(Protocol):
    """A part that can prove cheaply that it is reachable."""

    async def ping(self) -> None:
        """Return once the part answered; raise if it cannot."""
        ...


@attrs.frozen
class ReadinessCheck:
    """One named check: ``probe`` returns when the part is ready and raises when not."""

    name: str
    probe: Callable[[], Awaitable[None]] = attrs.field(repr=False)


def host_checks(
    *,
    workspaces: object | None,
    stores: Mapping[str, TenantStore],
    audit: object,
) -> tuple[ReadinessCheck, ...]:
    """The checks of a host holding these parts (see the module docstring for which)."""
    checks: list[ReadinessCheck] = []
    if isinstance(workspaces, Pingable):
        checks.append(ReadinessCheck("config_database", workspaces.ping))
    if stores:
        checks.append(ReadinessCheck("document_stores", _ready_stores_probe(stores)))
    if isinstance(audit, Pingable):
        checks.append(ReadinessCheck("audit", audit.ping))
    return tuple(checks)


def _ready_stores_probe(stores: Mapping[str, TenantStore]) -> Callable[[], Awaitable[None]]:
    async def probe() -> None:
        # Whether a store is Ready is read at each probe: one initialised since is checked.
        # Tenants sharing one repository object are pinged once.
        ready = {
            id(store.repository): store.repository
            for store in stores.values()
            if store.lifecycle.current.status is StoreStatus.READY
            and isinstance(store.repository, Pingable)
        }
        await asyncio.gather(*(repository.ping() for repository in ready.values()))

    return probe


async def run_check(check: ReadinessCheck, *, timeout_s: float = READINESS_TIMEOUT_S) -> str:
    """``ok``, ``timeout`` or ``unavailable`` for ``check``, within ``timeout_s``."""
    try:
        async with asyncio.timeout(timeout_s):
            await check.probe()
    except TimeoutError:
        _log.warning("readiness check %s: no answer within %.1f s", check.name, timeout_s)
        return "timeout"
    except Exception as exc:
        # The type only: a driver's message can name the host, the database or the user.
        _log.warning("readiness check %s failed: %s", check.name, type(exc).__name__)
        return "unavailable"
    return "ok"


def readiness_endpoint(
    checks: Sequence[ReadinessCheck], *, timeout_s: float = READINESS_TIMEOUT_S
) -> Callable[[Request], Awaitable[Response]]:
    """The ``/readyz`` endpoint over ``checks``: unauthenticated, never cached."""

    async def readyz(_request: Request) -> Response:
        words = await asyncio.gather(*(run_check(c, timeout_s=timeout_s) for c in checks))
        results = {check.name: word for check, word in zip(checks, words, strict=True)}
        ready = all(word == "ok" for word in words)
        return JSONResponse(
            {"status": "ready" if ready else "not_ready", "checks": results},
            status_code=200 if ready else 503,
            headers={"Cache-Control": "no-store"},
        )

    return readyz
