"""What stops a portal request: a page-level refusal, or a visitor who must sign in first.

Handlers raise these; the portal app turns a :class:`PortalError` into an HTML page with
its status and a :class:`SignInRequiredError` into a 303 to the sign-in form, so a refused,
expired or tampered session never shows a stack trace.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

__all__ = ["PortalError", "SignInReason", "SignInRequiredError"]


class SignInReason(StrEnum):
    """Why the visitor is sent to sign in; the sign-in page explains each."""

    ANONYMOUS = "anonymous"
    EXPIRED = "expired"
    REJECTED = "rejected"
    SIGNED_OUT = "signed-out"


class SignInRequiredError(Exception):
    """The request carries no session, or its token no longer verifies."""

    def __init__(self, reason: SignInReason) -> None:
        super().__init__(reason.value)
        self.reason = reason


class PortalError(Exception):
    """A request the portal refuses with ``status``, explained on a page.

    Args:
        status: the HTTP status of the page.
        title: the page's heading.
        message: what happened and what the operator can do (plain text; escaped).
        links: ``(portal path, label)`` pairs offered as next steps.
    """

    def __init__(
        self,
        status: int,
        title: str,
        message: str,
        *,
        links: Sequence[tuple[str, str]] = (),
    ) -> None:
        super().__init__(title)
        self.status = status
        self.title = title
        self.message = message
        self.links = tuple(links)
