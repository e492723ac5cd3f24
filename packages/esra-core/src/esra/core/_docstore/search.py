"""Searching the management list: the query, its keyset cursor and the page it returns.

The review screen searches the store through the store's own full-text index — FTS5
``MATCH`` on SQLite, the segments' ``tsvector`` under the store's text search configuration
on PostgreSQL — over the same indexed segments retrieval searches, so there is one indexing
implementation, not two. Unlike retrieval it sees every state (a Quarantined or Failed
document is what an operator comes to find), never a soft-deleted document, and one tenant.

``text`` matches a document when either

- its title (the sanitised file name) contains the text, case-insensitively — how a
  document with no extracted text (Pending, Failed) is found; or
- one of its segments holds every word of the text (``search_words``), as the index
  tokenizes and matches them. The words only ever reach the index as literals: each is an
  FTS5 string (``esra.sqlite.fts5_string``) or a ``phraseto_tsquery`` bind value, so FTS
  operators, quotes and brackets in the text are searched for, never obeyed.

Every other filter is structured: states (any of), scope, formats (any of), the uploader
(the operator subject recorded at upload, matched exactly), and the upload
time (``uploaded_since`` inclusive, ``uploaded_until`` exclusive, timezone-aware). Results
come newest first by ``(created_at, id)``; ``next_cursor`` is the last row's position, and
the next page starts strictly after it, so a page boundary never repeats or skips a row.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from datetime import UTC, datetime

import attrs

from esra.core._docstore.formats import DocumentFormat
from esra.core._docstore.model import DocumentState, StoredDocument
from esra.core.exceptions import InvalidRequestError

__all__ = [
    "DEFAULT_SEARCH_LIMIT",
    "MAX_SEARCH_LIMIT",
    "MAX_SEARCH_TEXT_CHARS",
    "MAX_SEARCH_WORDS",
    "DocumentCursor",
    "DocumentPage",
    "DocumentSearch",
    "DocumentSearchError",
    "after_cursor",
    "search_words",
    "title_contains",
]

DEFAULT_SEARCH_LIMIT = 50
MAX_SEARCH_LIMIT = 200
# A search box, not a document: long enough for a sentence, short enough that the index
# is never handed an unbounded expression.
MAX_SEARCH_TEXT_CHARS = 200
MAX_SEARCH_WORDS = 16
MAX_SCOPE_FILTER_CHARS = 256
MAX_UPLOADER_FILTER_CHARS = 256

# Words as the retrieval planner splits a request: letters, digits and underscores.
_WORD = re.compile(r"\w+")


class DocumentSearchError(InvalidRequestError):
    """A management search is malformed; ``parameter`` names the offending field."""

    public_message = "The document search is invalid."

    def __init__(self, parameter: str, message: str) -> None:
        super().__init__(message)
        self.parameter = parameter


def search_words(text: str) -> tuple[str, ...]:
    """The words of ``text`` a segment must all hold, lowercased, first occurrence kept."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(text):
        # Underscores are word characters to ``\w`` but separators to both indexes: a word
        # of nothing else would be an empty phrase, which FTS5 matches nowhere.
        if word.strip("_"):
            seen.setdefault(word.lower(), None)
    return tuple(seen)


def title_contains(title: str, text: str) -> bool:
    """Whether ``title`` contains ``text`` ignoring ASCII case (what every store compares)."""
    return _ascii_lower(text) in _ascii_lower(title)


def _ascii_lower(text: str) -> str:
    # SQLite's lower() folds ASCII only; folding the same way keeps every store's answer equal.
    return text.translate(_ASCII_LOWER)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _utc(parameter: str, moment: datetime | None) -> datetime | None:
    if moment is None:
        return None
    if moment.tzinfo is None:
        raise DocumentSearchError(parameter, f"{parameter} needs a UTC offset.")
    try:
        return moment.astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:59:59-14:00 is past datetime.max in UTC
        raise DocumentSearchError(parameter, f"{parameter} is out of range.") from None


def _printable(parameter: str, value: str, limit: int) -> None:
    if len(value) > limit:
        raise DocumentSearchError(parameter, f"{parameter} is longer than {limit} characters.")
    # NUL ends an FTS5 query string and control characters are never in a title or a token;
    # refusing them says so instead of silently searching for something else.
    if not value.isprintable():
        raise DocumentSearchError(parameter, f"{parameter} must be printable text.")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise DocumentSearchError(parameter, f"{parameter} must be valid text.") from None


@attrs.frozen
class DocumentCursor:
    """A position in the list: after the document created at ``created_at`` with ``id``."""

    created_at: datetime
    document_id: str

    def encode(self) -> str:
        """The opaque text form handed to callers."""
        raw = json.dumps(
            {"at": self.created_at.astimezone(UTC).isoformat(), "id": self.document_id}
        )
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> DocumentCursor:
        """Parse a cursor from ``encode``.

        Raises:
            DocumentSearchError: anything else (parameter ``cursor``).
        """
        invalid = DocumentSearchError("cursor", "cursor is not one this list issued.")
        if len(text) > 1024:
            raise invalid
        try:
            padded = text + "=" * (-len(text) % 4)
            document = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
            at = datetime.fromisoformat(document["at"])
            document_id = document["id"]
        except (ValueError, KeyError, TypeError, UnicodeError, binascii.Error):
            raise invalid from None
        if at.tzinfo is None or not isinstance(document_id, str) or not document_id:
            raise invalid
        if not document_id.isprintable() or len(document_id) > 128:
            raise invalid
        try:
            return cls(at.astimezone(UTC), document_id)
        except OverflowError:  # a time valid where written, out of range in UTC
            raise invalid from None


def after_cursor(document: StoredDocument, cursor: DocumentCursor | None) -> bool:
    """Whether ``document`` comes after ``cursor`` in newest-first ``(created_at, id)`` order."""
    if cursor is None:
        return True
    created = document.created_at.astimezone(UTC)
    return created < cursor.created_at or (
        created == cursor.created_at and document.id < cursor.document_id
    )


def _states(value: object) -> frozenset[DocumentState]:
    try:
        return frozenset(DocumentState(v) for v in value)  # type: ignore[attr-defined]
    except (ValueError, TypeError):
        raise DocumentSearchError("state", "state names an unknown document state.") from None


def _formats(value: object) -> frozenset[DocumentFormat]:
    try:
        return frozenset(DocumentFormat(v) for v in value)  # type: ignore[attr-defined]
    except (ValueError, TypeError):
        raise DocumentSearchError("type", "type names an unsupported document format.") from None


@attrs.frozen
class DocumentSearch:
    """Which of one tenant's live documents to list (the tenant is the repository call's).

    Empty ``states`` or ``formats`` mean every state or format; ``text``, ``scope`` and
    ``uploader`` None mean no such filter. ``text`` is stripped; blank text is no text filter.

    Raises:
        DocumentSearchError: text, scope or uploader too long or not printable, more than
            ``MAX_SEARCH_WORDS`` words, an unknown state or format, a naive time, ``since``
            not before ``until``, or a limit outside 1..``MAX_SEARCH_LIMIT``; ``parameter``
            names the field (as the admin API spells it).
    """

    text: str | None = None
    states: frozenset[DocumentState] = attrs.field(default=frozenset(), converter=_states)
    scope: str | None = None
    formats: frozenset[DocumentFormat] = attrs.field(default=frozenset(), converter=_formats)
    uploaded_since: datetime | None = None
    uploaded_until: datetime | None = None
    uploader: str | None = None
    limit: int = DEFAULT_SEARCH_LIMIT
    cursor: DocumentCursor | None = None

    def __attrs_post_init__(self) -> None:
        if self.text is not None:
            _printable("q", self.text, MAX_SEARCH_TEXT_CHARS)
            stripped = self.text.strip()
            object.__setattr__(self, "text", stripped or None)
            if len(search_words(stripped)) > MAX_SEARCH_WORDS:
                raise DocumentSearchError("q", f"q has more than {MAX_SEARCH_WORDS} words.")
        if self.scope is not None:
            _printable("scope", self.scope, MAX_SCOPE_FILTER_CHARS)
        if self.uploader is not None:
            _printable("uploader", self.uploader, MAX_UPLOADER_FILTER_CHARS)
        if isinstance(self.limit, bool) or not 1 <= self.limit <= MAX_SEARCH_LIMIT:
            raise DocumentSearchError(
                "limit", f"limit is a whole number from 1 to {MAX_SEARCH_LIMIT}."
            )
        since = _utc("since", self.uploaded_since)
        until = _utc("until", self.uploaded_until)
        if since is not None and until is not None and since >= until:
            raise DocumentSearchError("since", "since must be before until.")
        object.__setattr__(self, "uploaded_since", since)
        object.__setattr__(self, "uploaded_until", until)

    @property
    def words(self) -> tuple[str, ...]:
        """The words a segment must all hold (none: only the title can match the text)."""
        return search_words(self.text) if self.text is not None else ()

    def matches_metadata(self, document: StoredDocument) -> bool:
        """Every structured filter and the cursor (the text is the repository's to match)."""
        created = document.created_at.astimezone(UTC)
        return (
            not document.deleted
            and (not self.states or document.state in self.states)
            and (self.scope is None or document.scope == self.scope)
            and (not self.formats or document.format in self.formats)
            and (self.uploader is None or document.uploaded_by == self.uploader)
            and (self.uploaded_since is None or created >= self.uploaded_since)
            and (self.uploaded_until is None or created < self.uploaded_until)
            and after_cursor(document, self.cursor)
        )


@attrs.frozen
class DocumentPage:
    """One page of the list, newest first; ``next_cursor`` None on the last page."""

    documents: tuple[StoredDocument, ...]
    next_cursor: DocumentCursor | None = None

    @classmethod
    def of(cls, documents: list[StoredDocument], limit: int) -> DocumentPage:
        """The page from up to ``limit + 1`` rows in list order (the extra one says more)."""
        shown = tuple(documents[:limit])
        more = len(documents) > limit
        last = shown[-1] if more and shown else None
        cursor = DocumentCursor(last.created_at.astimezone(UTC), last.id) if last else None
        return cls(documents=shown, next_cursor=cursor)
