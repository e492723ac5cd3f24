"""Subprocess entry point: extract a PDF's pages with pypdf, under the parent's limits.

Reads the PDF from standard input and writes one JSON object to standard output:
``{"pages": [...]}`` or ``{"refusal": "PASSWORD_PROTECTED" | "MALFORMED_DOCUMENT",
"detail": "..."}``. The parent sets memory and CPU limits before this runs and kills it at a
wall-clock deadline; anything that dies here fails only this document.
"""

from __future__ import annotations

import json
import logging
import sys


def _extract(data: bytes) -> dict[str, object]:
    import io  # noqa: PLC0415 - imported after the limits are in force

    from pypdf import PdfReader  # noqa: PLC0415
    from pypdf.errors import FileNotDecryptedError, PdfReadError  # noqa: PLC0415

    logging.disable(logging.CRITICAL)  # pypdf warns on stderr for every recoverable defect
    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted and not reader.decrypt(""):
            return {"refusal": "PASSWORD_PROTECTED", "detail": "user password required"}
        pages = [page.extract_text() or "" for page in reader.pages]
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


def main() -> None:
    """Read stdin, extract, write the JSON result to stdout."""
    try:
        result = _extract(sys.stdin.buffer.read())
    except Exception as exc:
        result = {"refusal": "MALFORMED_DOCUMENT", "detail": type(exc).__name__}
    sys.stdout.write(json.dumps(result))


if __name__ == "__main__":
    main()
