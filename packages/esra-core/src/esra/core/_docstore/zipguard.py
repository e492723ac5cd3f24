"""Zip hardening: structure checked from the central directory, inflation counted as it runs.

Apache POI's defaults, which the REFERENCES adopt: at most 1000 entries; no duplicate,
absolute, ``..`` or symlink names; no overlapping entries (the overlap trick behind
non-recursive zip bombs); a compression ratio of at least 0.01 for any entry inflated past
100 KB; caps on each entry and on the total. Declared sizes are not trusted: bytes are
counted while streaming, and reading stops the moment a limit breaks. Only stored and
deflated entries are read, the two methods whose inflation can be counted as it runs.
"""

from __future__ import annotations

import io
import itertools
import stat
import zipfile
import zlib

import attrs

from esra.core._docstore.refusals import Breach, DocumentRefusedError
from esra.core.codes import DocumentRefusal

__all__ = ["ZipLimits", "inflate_members"]

_CHUNK = 64 * 1024
_LOCAL_HEADER_BYTES = 30
# zipfile inflates deflate with an output bound per read, so counting stops a bomb mid-way;
# for bzip2 and LZMA it decompresses each whole compressed chunk unbounded (a few hundred
# bytes become gigabytes in one read). Word writes only stored and deflated entries.
_COUNTABLE_METHODS = frozenset({zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED})


@attrs.frozen
class ZipLimits:
    """Limits on one archive; breaching any makes the document ``MALFORMED_DOCUMENT``."""

    max_entries: int = 1000
    max_entry_bytes: int = 64 * 1024 * 1024
    max_total_bytes: int = 128 * 1024 * 1024
    min_ratio: float = 0.01
    ratio_floor_bytes: int = 100 * 1024


def _malformed(detail: str, breach: Breach | None = Breach.ZIP_STRUCTURE) -> DocumentRefusedError:
    # Every breach is MALFORMED_DOCUMENT; the remedy says which limit it was.
    return DocumentRefusedError(DocumentRefusal.MALFORMED_DOCUMENT, detail=detail, breach=breach)


def _check_name(name: str, seen: set[str]) -> None:
    if not name or "\x00" in name:
        raise _malformed("empty or NUL entry name")
    normalized = name.replace("\\", "/")
    if normalized.startswith("/") or (len(normalized) > 1 and normalized[1] == ":"):
        raise _malformed("absolute entry name")
    if ".." in normalized.split("/"):
        raise _malformed("parent-directory entry name")
    folded = normalized.casefold()
    if folded in seen:
        raise _malformed("duplicate entry name")
    seen.add(folded)


def _check_structure(archive: zipfile.ZipFile, size: int, limits: ZipLimits) -> None:
    entries = archive.infolist()
    if len(entries) > limits.max_entries:
        raise _malformed("too many entries", Breach.ZIP_ENTRY_COUNT)
    seen: set[str] = set()
    for info in entries:
        _check_name(info.filename, seen)
        if stat.S_ISLNK(info.external_attr >> 16):
            raise _malformed("symbolic link entry")
        if info.flag_bits & 0x1:
            raise DocumentRefusedError(DocumentRefusal.PASSWORD_PROTECTED, detail="encrypted entry")
        # The central directory's method is the one zipfile decompresses with.
        if info.compress_type not in _COUNTABLE_METHODS:
            raise _malformed("unsupported compression method")
    # Each entry's local header and data must end before the next one starts.
    ordered = sorted(entries, key=lambda i: i.header_offset)
    for current, following in itertools.pairwise(ordered):
        end = current.header_offset + _LOCAL_HEADER_BYTES + current.compress_size
        if end > following.header_offset:
            raise _malformed("overlapping entries")
    if ordered and ordered[-1].header_offset + ordered[-1].compress_size > size:
        raise _malformed("entry beyond the archive")
    if sum(i.file_size for i in entries) > limits.max_total_bytes:
        raise _malformed("declared size over the total limit", Breach.ZIP_INFLATED_SIZE)


def _inflate(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, limits: ZipLimits, used: int
) -> bytes:
    parts: list[bytes] = []
    count = 0
    with archive.open(info) as member:
        while chunk := member.read(_CHUNK):
            count += len(chunk)
            if count > limits.max_entry_bytes or used + count > limits.max_total_bytes:
                raise _malformed("inflated size over the limit", Breach.ZIP_INFLATED_SIZE)
            if count > limits.ratio_floor_bytes and info.compress_size / count < limits.min_ratio:
                raise _malformed("compression ratio below the limit", Breach.ZIP_COMPRESSION_RATIO)
            parts.append(chunk)
    return b"".join(parts)


def inflate_members(data: bytes, limits: ZipLimits | None = None) -> dict[str, bytes]:
    """Check ``data``'s structure, then inflate every member under the limits.

    Returns the members by name, in archive order.

    Raises:
        DocumentRefusedError: ``MALFORMED_DOCUMENT`` (or ``PASSWORD_PROTECTED`` for encrypted
            entries) on the first breach; nothing is returned partially.
    """
    limits = limits or ZipLimits()
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            _check_structure(archive, len(data), limits)
            members: dict[str, bytes] = {}
            used = 0
            for info in archive.infolist():
                if info.is_dir():
                    continue
                members[info.filename] = _inflate(archive, info, limits, used)
                used += len(members[info.filename])
            return members
    except DocumentRefusedError:
        raise
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, ValueError) as exc:
        raise _malformed(
            f"unreadable archive: {type(exc).__name__}",
            None,  # damaged: the generic remedy
        ) from exc
