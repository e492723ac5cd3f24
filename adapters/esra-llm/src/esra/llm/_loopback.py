"""Which model endpoints may be spoken to in plain http: this machine's, and no other.

Every request to a model endpoint carries a credential (``Authorization``, ``api-key`` or
``x-api-key``) and prompts holding enterprise record text, so plain http is allowed only where
no network can read it: a loopback address (127.0.0.0/8, ``::1``) or ``localhost``, the local
vLLM, Ollama and llama.cpp case. The host is the one httpx parses and connects to, so a scheme
in capitals or an IDNA dot is judged as it will be used.

Only canonical spellings count. A resolver reads ``2130706433``, ``0x7f.1`` or ``127.1`` as
127.0.0.1, but whether it does is the platform's choice; ``::ffff:127.0.0.1`` is loopback only
where the stack maps it; ``0.0.0.0`` is no address at all; ``localhost.`` is a name a resolver
may send out to DNS. Each of them is refused: when in doubt, refuse.
"""

from __future__ import annotations

import ipaddress

import httpx

__all__ = ["is_loopback_host", "is_loopback_url"]

_LOOPBACK_NAME = "localhost"
_IPV6_LOOPBACK = ipaddress.IPv6Address("::1")


def is_loopback_url(url: str) -> bool:
    """Return True when ``url`` names this machine: 127.0.0.0/8, ``::1`` or ``localhost``.

    A URL that does not parse names nothing, and is not loopback.
    """
    try:
        host = httpx.URL(url).host
    except httpx.InvalidURL:
        return False
    return is_loopback_host(host)


def is_loopback_host(host: str) -> bool:
    """Return True for a host httpx parsed that is a loopback address or ``localhost``."""
    if host.lower() == _LOOPBACK_NAME:
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address):
        # Only ::1 itself; a zone index or an IPv4-mapped form is not taken on trust.
        return address == _IPV6_LOOPBACK and address.scope_id is None
    return address.is_loopback
