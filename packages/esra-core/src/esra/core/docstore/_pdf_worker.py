"""Sandbox body: extract a PDF's pages with pypdf, in a child process under hard limits.

The parent forks one child per document from a forkserver that has pypdf imported already
(so isolation costs a fork, not an interpreter start). The child applies its address-space
and CPU limits first, extracts, and sends one dict back: ``{"pages": [...]}`` or
``{"refusal": "PASSWORD_PROTECTED" | "MALFORMED_DOCUMENT", "detail": "..."}``. The parent
kills it at a wall-clock deadline; anything that dies here fails only this document.
"""

from __future__ import annotations

import io
import logging
import resource
from multiprocessing.connection import Connection

from pypdf import PdfReader
from pypdf.errors import FileNotDecryptedError, PdfReadError


def _extract(data: bytes) -> dict[str, object]:
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


def run_limited(data: bytes, memory_bytes: int, cpu_seconds: int, reply: Connection) -> None:
    """Child entry point: apply the limits, extract, send the result, exit."""
    try:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds))
        result = _extract(data)
    except BaseException as exc:
        # MemoryError under the address-space limit, or worse: this document fails, only it.
        result = {"refusal": "MALFORMED_DOCUMENT", "detail": type(exc).__name__}
    try:
        reply.send(result)
    finally:
        reply.close()
