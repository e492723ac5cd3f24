"""ConfiguredHostAllowlist: the outbound hosts each tenant's sources may connect to.

Settings list ``host:port`` pairs per tenant; a provider resolving its connection template
asks ``is_allowed(tenant, host, port)`` before any socket opens (``esra.sql``'s
``resolve_connection``), so one tenant's allowed database never becomes another's, and a
template that names any other host or port fails with ``HOST_NOT_ALLOWED``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from esra.core.exceptions import ConfigurationError

__all__ = ["ConfiguredHostAllowlist", "parse_host_port"]

_NAME = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.?)+")
_IPV6 = re.compile(r"\[([0-9A-Fa-f:.]+)\]")


def parse_host_port(text: str) -> tuple[str, int]:
    """``"db.internal:5432"`` → ``("db.internal", 5432)``; IPv6 literals in brackets.

    The port is required: an allowlist that admitted every port of a host would let a
    template reach any service on it.

    Raises:
        ConfigurationError: not ``host:port`` with a port from 1 to 65535.
    """
    host, sep, port = text.rpartition(":")
    bracketed = _IPV6.fullmatch(host)
    if bracketed:
        host = bracketed.group(1)
    elif not _NAME.fullmatch(host):
        host = ""
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        msg = f"{text!r} is not 'host:port' (a port from 1 to 65535 is required)"
        raise ConfigurationError(msg)
    return host.lower().rstrip("."), int(port)


class ConfiguredHostAllowlist:
    """Allows, per tenant, exactly the ``host:port`` pairs configured for it.

    Args:
        allowed: per tenant id, its ``host:port`` strings.

    Raises:
        ConfigurationError: a pair is malformed.
    """

    def __init__(self, allowed: Mapping[str, Iterable[str]] | None = None) -> None:
        self._allowed: dict[str, frozenset[tuple[str, int]]] = {
            tenant: frozenset(parse_host_port(each) for each in pairs)
            for tenant, pairs in (allowed or {}).items()
        }

    def hosts(self, tenant_id: str) -> frozenset[tuple[str, int]]:
        """The pairs ``tenant_id`` may connect to."""
        return self._allowed.get(tenant_id, frozenset())

    async def is_allowed(self, tenant_id: str, host: str, port: int) -> bool:
        """Whether ``tenant_id`` may connect to ``host``:``port`` (host compared lowercased)."""
        return (host.lower().rstrip("."), port) in self.hosts(tenant_id)

    def __repr__(self) -> str:
        return f"ConfiguredHostAllowlist(tenants={sorted(self._allowed)!r})"
