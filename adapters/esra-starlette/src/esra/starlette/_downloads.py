"""How the host hands out a stored document's original bytes: always as an attachment.

The store never renders a document, and neither does a browser that follows the host's
advice: ``application/octet-stream``, ``nosniff``, an attachment disposition, no caching.
The name is the store's sanitised title, given twice — an ASCII fallback for old clients
and the exact UTF-8 name (RFC 6266 / RFC 5987) — and can carry neither a path nor a quote.
"""

from __future__ import annotations

from urllib.parse import quote

from esra.core.docstore import sanitize_filename

__all__ = ["attachment_disposition", "download_headers"]


def attachment_disposition(title: str) -> str:
    """A ``Content-Disposition`` naming ``title`` safely."""
    safe = sanitize_filename(title)
    fallback = safe.encode("ascii", "replace").decode("ascii").replace("?", "_")
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(safe, safe='')}"


def download_headers(title: str) -> dict[str, str]:
    """Every header of a download response besides its type."""
    return {
        "Content-Disposition": attachment_disposition(title),
        "X-Content-Type-Options": "nosniff",
        "Cache-Control": "no-store",
    }
