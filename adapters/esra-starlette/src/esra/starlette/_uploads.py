"""What the admin API and the portal share about reading an upload request's files.

Both hand files to ``DocumentStoreService.upload`` one at a time and never read more than
one byte past the store's per-file limit (enough for the inspection to refuse the file as
too large), both read the optional security scope the same way, and both show each file by
its sanitised name (:func:`shown_name`), never the raw name the client submitted.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from starlette.datastructures import UploadFile

from esra.core.docstore import UploadOutcome, sanitize_filename

__all__ = ["MAX_SCOPE_CHARS", "read_each", "shown_name", "upload_scope"]

MAX_SCOPE_CHARS = 128


def upload_scope(value: object, default: str) -> str | None:
    """The submitted scope (``default`` when blank), or ``None`` when it is unusable."""
    if value is None or value == "":
        return default
    if not isinstance(value, str) or len(value) > MAX_SCOPE_CHARS or not value.isprintable():
        return None
    return value.strip() or default


def read_each(files: Sequence[UploadFile], per_file_limit: int) -> Iterator[tuple[str, bytes]]:
    """Each file's name and at most ``per_file_limit + 1`` of its bytes, one file at a time."""
    for upload in files:
        upload.file.seek(0)
        yield upload.filename or "unnamed", upload.file.read(per_file_limit + 1)


def shown_name(outcome: UploadOutcome) -> str:
    """The name to show for one uploaded file: its stored title, else its sanitised name.

    The submitted name is the client's text: a bidi override (U+202E) can make
    ``invoice\u202efdp.exe`` read as ``invoiceexe.pdf``, and control or zero-width characters
    can hide or forge parts of a page. Only the store's sanitised label is echoed.
    """
    if outcome.document is not None:
        return outcome.document.title
    return sanitize_filename(outcome.filename)
