"""Whether the portal's cookies carry ``Secure``: one rule for every cookie it sets."""

from __future__ import annotations

from starlette.requests import Request

__all__ = ["SECURE_COOKIES_STATE", "cookies_are_secure"]

# Where ``portal_app`` keeps its ``secure_cookies`` on the portal app's state.
SECURE_COOKIES_STATE = "secure_cookies"


def cookies_are_secure(request: Request) -> bool:
    """As ``portal_app(secure_cookies=)`` forces it (behind a TLS-terminating proxy the
    portal sees plain http), else whether the request arrived over https."""
    forced = getattr(request.app.state, SECURE_COOKIES_STATE, None)
    return forced if isinstance(forced, bool) else request.url.scheme == "https"
