"""``esra ingest``: bulk upload of files into one tenant's document store, then indexing.

Every file goes through ``upload_files``, so it is inspected exactly like an upload through
the API and gets the same classified refusal and remedy. Files are read one at a time, and
never more than the store's size limit plus one byte, so a huge file is refused as too large
without being held in memory. Unless told not to, the queue is then drained in this process
with an ``IngestionWorker``, so the files are searchable when the command returns, and the
per-file table on stdout shows each document's final state.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import TextIO

import attrs

from esra.core.docstore import (
    DocumentRepository,
    DocumentState,
    DocumentStoreRegistry,
    IndexedHook,
    IngestionWorker,
    OpenedStore,
    StoredDocument,
    StoreSettings,
    UploadLimits,
    upload_files,
)
from esra.core.ports import Clock
from esra.starlette._stores import DEFAULT_UPLOAD_SCOPE, StoreSpec
from esra.starlette._worker import StoreUnavailableError, open_stores, require_initialised

__all__ = [
    "DEFAULT_SCOPE",
    "IngestRow",
    "IngestUsageError",
    "collect_files",
    "ingest",
    "render_table",
    "shown",
    "summarize",
]

# The scope documents get unless told otherwise — the same as an admin API upload's; a caller
# reads them with the store's scope claim (``document_scopes`` by default) holding it, e.g.
# ``--claim document_scopes=general``.
DEFAULT_SCOPE = DEFAULT_UPLOAD_SCOPE
# While another worker holds one of our documents, how often to look again.
_POLL_S = 0.5
_BAR_WIDTH = 24
_UNFINISHED = frozenset({DocumentState.PENDING, DocumentState.PROCESSING})


class IngestUsageError(ValueError):
    """The command cannot run as asked (no such path, nothing to ingest, a bad scope)."""


@attrs.frozen
class IngestRow:
    """One file's line in the table: how the upload went and where its document ended up."""

    file: str
    outcome: str  # stored, refused or unreadable
    state: str  # the document's state, or "-" when nothing was stored
    detail: str = ""  # the classification and remedy, when there is something to do
    # Stored and searchable, or stored and queued when indexing was not asked for.
    ok: bool = False


def _walk(directory: Path) -> Iterator[Path]:
    for root, dirs, names in os.walk(directory):
        # Hidden entries (.git, .DS_Store, editor swap files) are never documents to share.
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            path = Path(root) / name
            # A link inside the tree may point anywhere (``notes.txt -> /etc/shadow``):
            # whoever can write into a shared directory must not choose what the
            # operator uploads from outside it. A link named on the command line is read.
            if not name.startswith(".") and not path.is_symlink() and path.is_file():
                yield path


def collect_files(paths: Sequence[Path]) -> list[Path]:
    """The files to ingest: files as named, directories walked recursively and sorted.

    Hidden files and directories and symbolic links inside a walked directory are skipped;
    a file reached twice is ingested once.

    Raises:
        IngestUsageError: a path does not exist or is neither a file nor a directory, or
            there is no file at all.
    """
    files: list[Path] = []
    seen: set[Path] = set()
    for path in paths:
        if path.is_dir():
            found = list(_walk(path))
        elif path.is_file():
            found = [path]
        elif path.exists():
            msg = f"{path}: not a regular file or a directory"
            raise IngestUsageError(msg)
        else:
            msg = f"{path}: no such file or directory"
            raise IngestUsageError(msg)
        for file in found:
            key = file.resolve()
            if key not in seen:
                seen.add(key)
                files.append(file)
    if not files:
        msg = "no files to ingest (hidden files are skipped)"
        raise IngestUsageError(msg)
    return files


class _Progress:
    """A progress line on stderr: redrawn in place on a terminal, one line per step otherwise."""

    def __init__(self, stream: TextIO, total: int) -> None:
        self._stream = stream
        self._total = total
        self._tty = stream.isatty()

    def step(self, done: int, label: str, note: str) -> None:
        note = shown(note)
        if not self._tty:
            self._stream.write(f"{label} [{done}/{self._total}] {note}\n")
            self._stream.flush()
            return
        filled = _BAR_WIDTH * done // max(self._total, 1)
        bar = "#" * filled + "-" * (_BAR_WIDTH - filled)
        line = f"{label} [{bar}] {done}/{self._total} {note}"
        # Clear the rest of the previous, possibly longer, line.
        self._stream.write(f"\r{line[:100]}\x1b[K")
        self._stream.flush()

    def end(self) -> None:
        if self._tty:
            self._stream.write("\n")
            self._stream.flush()


def shown(text: str) -> str:
    """``text`` as one line of printable characters, whatever a file name holds.

    A name is chosen by whoever wrote the file: a newline in it would forge a row of the
    table, an escape sequence would rewrite the terminal, and a byte that is not UTF-8
    (a surrogate here) would fail a strict stream. Each such character is written as its
    escape instead (``\\n``, ``\\x1b``, ``\\xff``).
    """
    if text.isprintable():
        return text
    return "".join(_escaped(character) for character in text)


def _escaped(character: str) -> str:
    if character.isprintable():
        return character
    code = ord(character)
    if 0xDC80 <= code <= 0xDCFF:  # os.fsdecode's stand-in for an undecodable byte
        return f"\\x{code - 0xDC00:02x}"
    return character.encode("unicode_escape").decode("ascii")


def _read(path: Path, limit: int) -> bytes:
    # One byte past the limit is enough for the inspection to refuse the file as too large.
    with path.open("rb") as handle:
        return handle.read(limit + 1)


def _detail(document: StoredDocument) -> str:
    if document.state is DocumentState.QUARANTINED:
        rules = ", ".join(sorted({f.rule for f in document.findings})) or "scanner findings"
        return (
            f"INJECTION_SUSPECTED ({rules}): not searchable until an administrator reviews "
            "and releases it"
        )
    if document.state is DocumentState.FAILED:
        return f"{document.failure}: {document.remedy}" if document.failure else "failed"
    if document.state in _UNFINISHED:
        return "queued: `esra worker` indexes it"
    return ""


async def _drain(
    repository: DocumentRepository,
    tenant_id: str,
    ids: Sequence[str],
    *,
    worker: IngestionWorker,
    progress: _Progress,
    wait_s: float,
) -> None:
    """Run worker turns until none of ``ids`` is pending or processing.

    A document another worker holds is waited for up to ``wait_s`` of idle time: by then
    its lease has expired and this worker claims it, or the table reports it queued.
    """
    loop = asyncio.get_running_loop()
    idle_since: float | None = None
    while True:
        turns = await worker.run_turn()
        documents = [await repository.get(tenant_id, i) for i in ids]
        open_ids = [d for d in documents if d is not None and d.state in _UNFINISHED]
        done = len(ids) - len(open_ids)
        progress.step(done, "indexing", "documents processed")
        if not open_ids:
            return
        if any(t.claimed for t in turns):
            idle_since = None
            continue
        idle_since = idle_since if idle_since is not None else loop.time()
        if loop.time() - idle_since >= wait_s:
            return
        await asyncio.sleep(_POLL_S)


async def ingest(
    files: Sequence[Path],
    *,
    store: StoreSpec,
    tenant_id: str,
    scope: str,
    index: bool,
    clock: Clock,
    worker_id: str,
    err: TextIO,
    limits: UploadLimits | None = None,
    store_settings: StoreSettings | None = None,
    initialise: Callable[[OpenedStore], Awaitable[object]] | None = None,
    on_indexed: IndexedHook | None = None,
    registry: DocumentStoreRegistry | None = None,
    uploaded_by: str | None = None,
) -> list[IngestRow]:
    """Upload ``files`` into ``tenant_id``'s store at ``store`` and (with ``index``) index them.

    Args:
        files: the files, in order (see :func:`collect_files`).
        store: the tenant's store (``Runtime.stores[tenant_id]``, of any kind, or a SQLite
            file); it must be initialised unless ``initialise`` is given.
        tenant_id: the tenant the documents belong to.
        scope: the security scope given to every document.
        index: drain the queue in-process before returning.
        clock: time for the records and leases.
        worker_id: the in-process worker's claim owner.
        err: where progress goes.
        limits: the upload limits (the API's defaults otherwise).
        store_settings: the indexing settings (the store defaults otherwise).
        initialise: initialises the opened store where it is not yet, as an audited
            action on the user's behalf (``esra.starlette._store_init``'s
            ``CliStoreInitialisation``: the embedded default's store); without it a store
            not initialised by an administrator is refused.
        on_indexed: awaited after each document indexed (``esra.starlette._warming``'s
            ``StoreWarmer``); its errors are logged by type and never fail the indexing.
        registry: opens the store by kind (default: the installed ``esra.document_stores``).
        uploaded_by: recorded as each document's uploader (the CLI's ``cli:<OS user>``).

    Returns:
        One row per file, in order.

    Raises:
        IngestUsageError: ``scope`` is empty or not printable.
        StoreUnavailableError: the store cannot be opened or initialised, is not
            initialised (without ``initialise``), or fails while in use.
    """
    if not scope.strip() or not scope.isprintable():
        msg = "--scope must be a non-empty, printable scope name"
        raise IngestUsageError(msg)
    limits = limits or UploadLimits()
    settings = store_settings or StoreSettings()
    async with open_stores({tenant_id: store}, registry=registry) as opened:
        (handle,) = opened.values()
        if initialise is not None:
            await initialise(handle)
        await require_initialised(handle)
        try:
            return await _ingest(
                handle.repository,
                files,
                tenant_id=tenant_id,
                scope=scope,
                index=index,
                clock=clock,
                worker_id=worker_id,
                err=err,
                limits=limits,
                settings=settings,
                on_indexed=on_indexed,
                uploaded_by=uploaded_by,
            )
        except handle.errors as exc:
            msg = f"the document store {handle.location} failed: {exc}"
            raise StoreUnavailableError(msg) from exc


async def _ingest(
    repository: DocumentRepository,
    files: Sequence[Path],
    *,
    tenant_id: str,
    scope: str,
    index: bool,
    clock: Clock,
    worker_id: str,
    err: TextIO,
    limits: UploadLimits,
    settings: StoreSettings,
    on_indexed: IndexedHook | None,
    uploaded_by: str | None,
) -> list[IngestRow]:
    """Upload into the opened ``repository``, index when asked, and read the outcome back."""
    rows, stored = await _upload(
        repository,
        files,
        tenant_id=tenant_id,
        scope=scope,
        clock=clock,
        limits=limits,
        progress=_Progress(err, len(files)),
        uploaded_by=uploaded_by,
    )
    if index and stored:
        worker = IngestionWorker(
            repository,
            worker_id=worker_id,
            clock=clock,
            settings_for=lambda _t: settings,
            on_indexed=on_indexed,
        )
        progress = _Progress(err, len(stored))
        await _drain(
            repository,
            tenant_id,
            list(stored.values()),
            worker=worker,
            progress=progress,
            wait_s=settings.lease_s,
        )
        progress.end()
    # Without indexing, queued is success (as is a concurrent worker's head start).
    wanted = {DocumentState.INDEXED} if index else {DocumentState.INDEXED, *_UNFINISHED}
    for position, document_id in stored.items():
        document = await repository.get(tenant_id, document_id)
        if document is not None:
            rows[position] = attrs.evolve(
                rows[position],
                state=document.state.value,
                detail=_detail(document),
                ok=document.state in wanted,
            )
    return rows


async def _upload(
    repository: DocumentRepository,
    files: Sequence[Path],
    *,
    tenant_id: str,
    scope: str,
    clock: Clock,
    limits: UploadLimits,
    progress: _Progress,
    uploaded_by: str | None,
) -> tuple[list[IngestRow], dict[int, str]]:
    """Upload each file; return the rows and, by row position, the stored documents' ids."""
    rows: list[IngestRow] = []
    stored: dict[int, str] = {}
    for position, path in enumerate(files):
        try:
            data = _read(path, limits.max_bytes)
        except OSError as exc:
            rows.append(IngestRow(str(path), "unreadable", "-", f"cannot read: {exc.strerror}"))
        else:
            (outcome,) = await upload_files(
                repository,
                tenant_id,
                [(path.name, data)],
                scope=scope,
                clock=clock,
                limits=limits,
                uploaded_by=uploaded_by,
            )
            if outcome.document is None:
                detail = f"{outcome.refusal}: {outcome.remedy}"
                rows.append(IngestRow(str(path), "refused", "-", detail))
            else:
                stored[position] = outcome.document.id
                document = outcome.document
                rows.append(IngestRow(str(path), "stored", document.state.value, _detail(document)))
        progress.step(position + 1, "upload", f"{path}: {rows[-1].outcome}")
    progress.end()
    return rows, stored


def render_table(rows: Sequence[IngestRow]) -> str:
    """The per-file table: FILE, OUTCOME, STATE, DETAIL, columns aligned."""
    header = IngestRow("FILE", "OUTCOME", "STATE", "DETAIL")
    table = [
        header,
        *(
            attrs.evolve(r, file=shown(r.file), state=shown(r.state), detail=shown(r.detail))
            for r in rows
        ),
    ]
    widths = [
        max(len(getattr(r, column)) for r in table) for column in ("file", "outcome", "state")
    ]
    lines = []
    for row in table:
        cells = (row.file, row.outcome, row.state)
        line = "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True))
        lines.append(f"{line}  {row.detail}".rstrip())
    return "\n".join(lines) + "\n"


def summarize(rows: Sequence[IngestRow]) -> str:
    """One line counting the files by outcome and the stored documents by state."""
    counts: dict[str, int] = {}
    for row in rows:
        label = row.state if row.outcome == "stored" else row.outcome
        counts[label] = counts.get(label, 0) + 1
    tally = ", ".join(f"{n} {label}" for label, n in sorted(counts.items()))
    return f"{len(rows)} file(s): {tally}"
