"""Sandbox body: a PDF's pages with pypdf, or a classified refusal. Runs only in a child.

``{"pages": [...]}`` or ``{"refusal": "PASSWORD_PROTECTED" | "MALFORMED_DOCUMENT" |
"TEXT_TOO_LONG", "detail": "..."}`` — see ``_sandbox_server`` for the process and its limits.
"""

from __future__ import annotations

import io
import logging

from pypdf import PdfReader
from pypdf.errors import FileNotDecryptedError, PdfReadError


def extract_pages(data: bytes, max_chars: int) -> dict[str, object]:
    """The pages' text, stopping with ``TEXT_TOO_LONG`` once it passes ``max_chars``."""
    logging.disable(logging.CRITICAL)  # pypdf warns on stderr for every recoverable defect
    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted and not reader.decrypt(""):
            return {"refusal": "PASSWORD_PROTECTED", "detail": "user password required"}
        pages: list[str] = []
        total = 0
        for page in reader.pages:
            pages.append(page.extract_text() or "")
            total += len(pages[-1]) + 1
            if total > max_chars:
                return {"refusal": "TEXT_TOO_LONG", "detail": f"more than {max_chars} characters"}
    except FileNotDecryptedError:
        return {"refusal": "PASSWORD_PROTECTED", "detail": "not decryptable"}
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
        return {"refusal": "MALFORMED_DOCUMENT", "detail": type(exc).__name__}
    except NotImplementedError as exc:
        # Unsupported encryption or filters: pypdf cannot read it, whatever the password.
        return {"refusal": "PASSWORD_PROTECTED", "detail": type(exc).__name__}
    except RecursionError:
        return {"refusal": "MALFORMED_DOCUMENT", "detail": "RecursionError"}
    return {"pages": pages}
