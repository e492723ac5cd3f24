"""One-shot notices after an action: POST, redirect, then the next page says what happened.

The notice travels in a short-lived cookie holding a code from a closed set, never text: a
forged or stale cookie can at worst show one of these fixed sentences.
"""

from __future__ import annotations

from enum import StrEnum

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from esra.starlette._portal.cookies import cookies_are_secure
from esra.starlette._portal.paths import base_path, portal_url

__all__ = ["NOTICE_COOKIE", "Notice", "clear_notice", "redirect_with_notice", "take_notice"]

NOTICE_COOKIE = "esra_portal_notice"
_NOTICE_MAX_AGE_S = 60


class Notice(StrEnum):
    """What an action did; ``text`` is the sentence shown."""

    ENABLED = "enabled"
    INITIALISING = "initialising"
    RELEASED = "released"
    REINDEXED = "reindexed"
    DELETED = "deleted"
    SETTINGS_SAVED = "settings_saved"

    @property
    def text(self) -> str:
        """The sentence the next page shows."""
        return _TEXT[self]


_TEXT = {
    Notice.ENABLED: "The document store is enabled. Initialise it to start taking documents.",
    Notice.INITIALISING: (
        "Initialisation started. It runs in the background; this page follows it."
    ),
    Notice.RELEASED: (
        "Released from quarantine: the document is Indexed and searchable. The release is "
        "recorded with your name."
    ),
    Notice.REINDEXED: (
        "Queued for re-indexing: the document is Pending until the ingestion worker "
        "extracts it again."
    ),
    Notice.DELETED: "The document was deleted: it is gone from search, fetch and this list.",
    Notice.SETTINGS_SAVED: (
        "The store's settings were saved; every ingestion worker applies them at its next "
        "turn. The change is recorded with your name."
    ),
}


def redirect_with_notice(request: Request, path: str, notice: Notice) -> Response:
    """303 to the portal page ``path``, which then shows ``notice``."""
    response = RedirectResponse(portal_url(request, path), status_code=303)
    response.set_cookie(
        NOTICE_COOKIE,
        notice.value,
        max_age=_NOTICE_MAX_AGE_S,
        path=base_path(request) or "/",
        httponly=True,
        samesite="strict",
        secure=cookies_are_secure(request),
    )
    return response


def take_notice(request: Request) -> Notice | None:
    """The pending notice of ``request``, if its cookie names one."""
    value = request.cookies.get(NOTICE_COOKIE)
    try:
        return Notice(value) if value else None
    except ValueError:
        return None


def clear_notice(request: Request, response: Response) -> None:
    """Drop the notice cookie once a page has shown it."""
    response.delete_cookie(NOTICE_COOKIE, path=base_path(request) or "/")
