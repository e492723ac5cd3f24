"""Ingestion: uploads reported per file, and the worker turn that drains the queue fairly.

upload → inspect → persist Pending → per-file outcome; worker: claim → extract → scan →
segment → complete (Indexed, or Quarantined with findings), each step fenced to the claim.
A worker claims one document at a time, only when it starts on it, and renews that
document's lease while extracting it (``LeaseHeartbeat``): no document waits under a lease
behind a slow neighbour, and a long extraction is never mistaken for a dead worker.
Extraction, scanning and segmenting run off the event loop, so the renewals keep their beat.
A renewal that finds the document no longer this claim's (reclaimed after a stall, or
re-indexed or deleted by an operator) abandons it at once: nothing is written for it, it is
counted ``lost``, and the worker goes on with its next claim. Abandoning cancels the
extraction (a ``CancelToken``): a PDF's or DOCX's sandbox child is killed, with all it
started, rather than parse on for a result nobody takes while another worker extracts the
same document.
A stop takes effect between documents: the document in hand is finished, nothing more is
claimed, and the turn says it stopped — a restart never waits for whole batches, nor leaves
a document to its lease. Tenants are served in a ``RoundRobin``: a worker's first turn starts
where its id puts it, and each later one continues after the last tenant it served, so no
tenant is always first and workers do not all start on the same one.
A host may follow each document it indexed with its own work (``on_indexed``: warming a
model's caches from the segments), which can never fail the indexing.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import warnings
import zlib
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeAlias

import attrs

from esra.core._audit.record import AuditRecord
from esra.core._docstore.extraction import SandboxLimits, extract, segment_extraction
from esra.core._docstore.extras import require_document_extra
from esra.core._docstore.heartbeat import LeaseHeartbeat, LeaseLostError
from esra.core._docstore.model import (
    Claim,
    DocumentState,
    IndexedContent,
    StoredDocument,
    StoredSegment,
    StoreSettings,
)
from esra.core._docstore.refusals import DocumentRefusedError
from esra.core._docstore.repository import DocumentRepository
from esra.core._docstore.sandbox import (
    CancelToken,
    ExtractionCancelledError,
    SandboxUnavailableError,
)
from esra.core._docstore.scanner import MAX_FINDINGS, Finding, ScanPolicy, scan_text
from esra.core._docstore.upload import AcceptedUpload, UploadLimits, inspect_upload
from esra.core._pipeline.metrics import count_ingestion
from esra.core.codes import DocumentRefusal
from esra.core.ports import Clock

__all__ = [
    "IndexedHook",
    "IngestionWorker",
    "RoundRobin",
    "TenantTurn",
    "UploadOutcome",
    "upload_files",
]

_log = logging.getLogger(__name__)
# Called with the claim and the content of each document this worker indexed (owned and
# Indexed, not Quarantined), once the store holds it.
IndexedHook: TypeAlias = Callable[[Claim, IndexedContent], Awaitable[None]]
# Refusals that re-extraction cannot cure: the document fails at once, attempts or not.
_FINAL = frozenset(
    {
        DocumentRefusal.MALFORMED_DOCUMENT,
        DocumentRefusal.PASSWORD_PROTECTED,
        DocumentRefusal.ACTIVE_CONTENT,
        DocumentRefusal.MACRO_ENABLED,
        DocumentRefusal.TYPE_MISMATCH,
        # The extraction limits are properties of the bytes: another attempt hits them again.
        DocumentRefusal.TEXT_TOO_LONG,
        DocumentRefusal.TOO_MANY_SEGMENTS,
    }
)


@attrs.frozen
class UploadOutcome:
    """One file's verdict: stored (with its document), or refused with a remedy.

    A file stored as Failed (a ``.docx`` that broke a safety limit) has both: its document,
    and the refusal and remedy it failed with (``stored_as_failed``).
    """

    filename: str
    document: StoredDocument | None = None
    refusal: DocumentRefusal | None = None
    remedy: str | None = None

    @property
    def stored_as_failed(self) -> bool:
        """Whether the file was kept, as a Failed document, for the operator to review."""
        return self.document is not None and self.document.state is DocumentState.FAILED


async def upload_files(
    repository: DocumentRepository,
    tenant_id: str,
    files: Iterable[tuple[str, bytes]],
    *,
    scope: str,
    clock: Clock,
    limits: UploadLimits | None = None,
    uploaded_by: str | None = None,
    audit: Callable[[StoredDocument], AuditRecord] | None = None,
) -> list[UploadOutcome]:
    """Inspect and persist each file; one bad file never affects the others.

    ``files`` is consumed one at a time, so a lazy iterable keeps one file in memory.
    ``uploaded_by`` (the operator's subject) is recorded with each stored document, and
    ``audit``'s record of each stored document is held in the store's audit outbox with it
    (``DocumentRepository.add``); a refused file stores, and holds, nothing.
    """
    outcomes = []
    for filename, data in files:
        try:
            # Off the event loop: a .docx is inflated and its XML parsed in a sandbox child,
            # and waiting for it (seconds for a large package) would stall every request the
            # host serves.
            accepted = await asyncio.to_thread(
                inspect_upload, filename, data, limits, holder=tenant_id
            )
            document = await repository.add(
                tenant_id,
                accepted,
                scope=scope,
                now=clock.now(),
                uploaded_by=uploaded_by,
                audit=audit,
            )
        except DocumentRefusedError as refused:
            remedy = refused.remedy
            if refused.refusal is DocumentRefusal.DUPLICATE_DOCUMENT and refused.detail:
                remedy = f"The same content is already stored as '{refused.detail}'."
            outcomes.append(
                UploadOutcome(filename=filename, refusal=refused.refusal, remedy=remedy)
            )
            continue
        if document.state is DocumentState.FAILED:
            outcomes.append(
                UploadOutcome(
                    filename=filename,
                    document=document,
                    refusal=document.failure,
                    remedy=document.remedy,
                )
            )
            continue
        outcomes.append(UploadOutcome(filename=filename, document=document))
    return outcomes


@attrs.frozen
class TenantTurn:
    """What one tenant's turn did. ``bound_reached`` records a full batch, so a long queue is
    distinguishable from a drained one; ``unreachable`` ends only that tenant's turn;
    ``stopped`` says a stop ended the worker's turn here, before this tenant's batch was
    full or its queue drained (``claimed`` may be 0: the stop kept its turn from starting),
    and no later tenant was served."""

    tenant_id: str
    claimed: int = 0
    indexed: int = 0
    quarantined: int = 0
    failed: int = 0
    retried: int = 0
    lost: int = 0
    bound_reached: bool = False
    unreachable: bool = False
    stopped: bool = False


class RoundRobin:
    """The order one worker serves its keys (tenants, or stores) in, turn after turn.

    The first order starts at a position derived from ``worker_id`` (a CRC-32 of it, not
    Python's ``hash``, which differs per process): workers spread over the keys instead of
    all starting on the first one, and a given id always starts at the same place. Each
    later order continues after the last key reported :meth:`served`, by name, so the
    worker goes round the keys one batch each whatever keys come and go between turns.
    Two ids may still start at one position; the spread is a hash's, not an assignment.
    """

    def __init__(self, worker_id: str) -> None:
        self._offset = zlib.crc32(worker_id.encode("utf-8"))
        self._last_served: str | None = None

    def order(self, keys: Iterable[str]) -> list[str]:
        """``keys``, each once, starting where this worker's rotation stands."""
        ordered = sorted(set(keys))
        if not ordered:
            return []
        if self._last_served is None:
            start = self._offset % len(ordered)
        else:
            start = bisect.bisect_right(ordered, self._last_served) % len(ordered)
        return ordered[start:] + ordered[:start]

    def served(self, key: str) -> None:
        """``key`` was served: the next order starts after it."""
        self._last_served = key


@attrs.define
class _Tally:
    indexed: int = 0
    quarantined: int = 0
    failed: int = 0
    retried: int = 0
    lost: int = 0


class IngestionWorker:
    """Drains the ingestion queue one bounded batch per tenant per turn.

    Tenants are served in a :class:`RoundRobin` of this worker's: its first turn starts at a
    position its id gives, each later one after the last tenant it served.

    Args:
        repository: the store.
        worker_id: unique per worker process; the claim's owner, and where its rotation
            over the tenants starts.
        clock: time for leases.
        settings_for: the store settings of a tenant (the host's defaults and the worker's
            lease); the values the tenant configured in its store (``load_configuration``)
            replace the configurable ones at each turn.
        sandbox_limits: the limits of the sandbox child each PDF and DOCX is parsed in.
        pdf_limits: deprecated name of ``sandbox_limits`` (from when only PDFs were
            sandboxed); used when ``sandbox_limits`` is not given, with a warning.
        on_indexed: awaited after each document this worker indexed, with its claim and
            content; an error it raises is logged by type and indexing goes on.

    Raises:
        MissingExtraError: ``esra-core[documents]`` is not installed (at construction).
    """

    def __init__(
        self,
        repository: DocumentRepository,
        *,
        worker_id: str,
        clock: Clock,
        settings_for: Callable[[str], StoreSettings] = lambda _tenant: StoreSettings(),
        sandbox_limits: SandboxLimits | None = None,
        pdf_limits: SandboxLimits | None = None,
        on_indexed: IndexedHook | None = None,
    ) -> None:
        # A worker without pypdf / python-docx would fail every PDF and DOCX as a document
        # error; refuse to start instead, naming the extra to install.
        require_document_extra()
        self._repository = repository
        self._worker_id = worker_id
        self._clock = clock
        self._settings_for = settings_for
        if pdf_limits is not None:
            warnings.warn(
                "IngestionWorker(pdf_limits=...) is deprecated: the limits bound DOCX parsing "
                "too; pass sandbox_limits=...",
                DeprecationWarning,
                stacklevel=2,
            )
        self._sandbox_limits = sandbox_limits or pdf_limits or SandboxLimits()
        self._on_indexed = on_indexed
        self._rotation = RoundRobin(worker_id)

    async def run_turn(self, *, stop: asyncio.Event | None = None) -> list[TenantTurn]:
        """One pass over every tenant with work; a failing store ends only its tenant's turn.

        Args:
            stop: once set, the turn ends at the next document boundary: the document in
                hand is finished (its completion or failure written, its lease no longer
                renewed), nothing more is claimed and no further tenant is served. The
                tenant where it ended is reported ``stopped``; a turn asked to stop before
                it starts does nothing and returns ``[]``. Without it, every tenant with
                work gets its whole batch.
        """
        if stop is not None and stop.is_set():
            return []
        try:
            tenants = await self._repository.tenants_with_work(now=self._clock.now())
        except Exception:
            _log.warning("ingestion could not list tenants with work", exc_info=True)
            return []
        turns = []
        for tenant_id in self._rotation.order(tenants):
            turn = await self._tenant_turn(tenant_id, stop)
            turns.append(turn)
            if turn.stopped:
                if turn.claimed:  # partly served: the next turn moves on past it
                    self._rotation.served(tenant_id)
                break
            self._rotation.served(tenant_id)
        return turns

    async def _tenant_turn(self, tenant_id: str, stop: asyncio.Event | None) -> TenantTurn:
        if stop is not None and stop.is_set():
            # Not even the settings are read: a stopping worker touches no more tenants.
            return TenantTurn(tenant_id=tenant_id, stopped=True)
        try:
            # Read at every turn: an operator's "configure" applies without a restart, to
            # every worker on the store. Unreadable settings end the turn (fail closed: a
            # "reject" policy must never fall back to the defaults' "quarantine").
            settings = await self._settings(tenant_id)
            # This tenant's documents only, at this tenant's own ceiling.
            await self._repository.fail_exhausted(
                tenant_id, max_attempts=settings.max_attempts, now=self._clock.now()
            )
        except Exception:
            _log.warning("store of tenant %s unreachable; turn ended", tenant_id, exc_info=True)
            return TenantTurn(tenant_id=tenant_id, unreachable=True)
        tally = _Tally()
        claimed = 0
        unreachable = False
        stopped = False
        # One document at a time, claimed only as it is started: a claim never holds a
        # document this worker is not working on, and a stop waits for one document only.
        while claimed < settings.batch_per_tenant:
            if stop is not None and stop.is_set():
                stopped = True
                break
            try:
                claims = await self._repository.claim(
                    tenant_id,
                    worker_id=self._worker_id,
                    limit=1,
                    lease_s=settings.lease_s,
                    max_attempts=settings.max_attempts,
                    now=self._clock.now(),
                )
                if not claims:
                    break
                claimed += len(claims)
                for claim in claims:
                    await self._process(claim, settings, tally)
            except Exception:
                # The store went away: stop this tenant; the lease of a document in hand
                # lapses and it is reclaimed later.
                _log.warning("store of tenant %s failed mid-turn", tenant_id, exc_info=True)
                unreachable = True
                break
        bound_reached = claimed >= settings.batch_per_tenant
        if bound_reached:
            _log.info("tenant %s reached its batch bound of %d", tenant_id, claimed)
        if stopped:
            _log.info("tenant %s: stop requested, nothing more claimed", tenant_id)
        return TenantTurn(
            tenant_id=tenant_id,
            claimed=claimed,
            bound_reached=bound_reached,
            unreachable=unreachable,
            stopped=stopped,
            **attrs.asdict(tally),
        )

    async def _settings(self, tenant_id: str) -> StoreSettings:
        """The tenant's settings: the worker's, with the store's configured values in place."""
        settings = self._settings_for(tenant_id)
        configured = await self._repository.load_configuration(tenant_id)
        return configured.settings.applied_to(settings) if configured is not None else settings

    async def _extract_classified(
        self, claim: Claim, upload: AcceptedUpload, settings: StoreSettings
    ) -> _Extracted:
        """Extract, scan and segment ``claim``'s document; any failure is the document's.

        Raises:
            DocumentRefusedError: the document cannot be extracted. An error extraction did
                not classify is ``MALFORMED_DOCUMENT``: this file failed, not the store, so it
                must not end the tenant's turn (and leave the file Processing) as a store
                error would. Only extraction is guarded here; store calls fail as the store's.

        Cancelled, it returns at once, and cancels the extraction in its thread (which Python
        cannot interrupt): a PDF's or DOCX's sandbox child is killed, and the thread stops
        instead of scanning and segmenting a text nobody will take.
        """
        cancel = CancelToken()
        try:
            return await asyncio.to_thread(
                _extract,
                upload,
                self._sandbox_limits,
                settings.scan_policy,
                claim.tenant_id,
                cancel,
            )
        except asyncio.CancelledError:
            cancel.cancel()
            raise
        except DocumentRefusedError:
            raise
        except Exception as exc:
            # By type only, with no traceback: a message could quote the document.
            _log.warning(
                "extracting document %s of tenant %s raised %s; failed as malformed",
                claim.document_id,
                claim.tenant_id,
                type(exc).__name__,
            )
            raise DocumentRefusedError(
                DocumentRefusal.MALFORMED_DOCUMENT,
                detail=f"unclassified extraction error: {type(exc).__name__}",
            ) from exc

    async def _process(self, claim: Claim, settings: StoreSettings, tally: _Tally) -> None:
        upload = AcceptedUpload(
            display_name=claim.title, format=claim.format, data=claim.data, sha256=""
        )
        heartbeat = LeaseHeartbeat(
            self._repository,
            claim,
            lease_s=settings.lease_s,
            interval_s=settings.heartbeat_interval_s,
            clock=self._clock,
        )
        try:
            # The heartbeat stops before the write that ends the claim, never during it.
            async with heartbeat:
                extracted = await heartbeat.unless_lost(
                    self._extract_classified(claim, upload, settings)
                )
        except LeaseLostError:
            # Any write would be refused by the claim fence: nothing is written, and the
            # document's current claim decides its outcome.
            _log.info(
                "abandoned document %s of tenant %s (attempt %d): its lease was lost",
                claim.document_id,
                claim.tenant_id,
                claim.attempt,
            )
            _count(tally, False, "lost", claim.tenant_id)
            return
        except DocumentRefusedError as refused:
            # A sandbox server that died says nothing of the document: retried, as transient.
            final = (
                refused.refusal in _FINAL and not isinstance(refused, SandboxUnavailableError)
            ) or claim.attempt >= settings.max_attempts
            owned = await self._repository.fail(
                claim,
                refused.refusal,
                retry=not final,
                now=self._clock.now(),
                breach=refused.breach,
            )
            _count(tally, owned, "failed" if final else "retried", claim.tenant_id)
            return
        findings = extracted.findings
        if findings and settings.scan_policy is ScanPolicy.REJECT:
            owned = await self._repository.fail(
                claim,
                DocumentRefusal.INJECTION_SUSPECTED,
                retry=False,
                now=self._clock.now(),
                findings=findings,
            )
            _count(tally, owned, "failed", claim.tenant_id)
            return
        quarantine = bool(findings) and settings.scan_policy is ScanPolicy.QUARANTINE
        content = IndexedContent(
            text=extracted.text,
            segments=extracted.segments,
            findings=findings,
            state=DocumentState.QUARANTINED if quarantine else DocumentState.INDEXED,
            retain_bytes=settings.retain_bytes,
        )
        owned = await self._repository.complete(claim, content, now=self._clock.now())
        _count(tally, owned, "quarantined" if quarantine else "indexed", claim.tenant_id)
        if owned and not quarantine and self._on_indexed is not None:
            await _after_indexed(self._on_indexed, claim, content)


@attrs.frozen
class _Extracted:
    text: str
    findings: tuple[Finding, ...]
    segments: tuple[StoredSegment, ...]


def _extract(
    upload: AcceptedUpload,
    sandbox_limits: SandboxLimits,
    policy: ScanPolicy,
    tenant_id: str,
    cancel: CancelToken,
) -> _Extracted:
    """Extract, scan and (unless it is to be rejected) segment one of ``tenant_id``'s
    documents, in a thread, unless ``cancel`` is cancelled before the text is scanned.

    Raises:
        DocumentRefusedError: the document cannot be extracted.
        ExtractionCancelledError: ``cancel`` was cancelled (by the thread's abandoned caller,
            who reads nothing of it) before the text was scanned.
    """
    extraction = extract(upload, sandbox_limits=sandbox_limits, holder=tenant_id, cancel=cancel)
    if cancel.cancelled:
        raise ExtractionCancelledError
    # The title (the file name) is a returned field, read by a model beside every fragment:
    # an instruction in it is one in the document. It comes first, as a reader meets it.
    in_title = tuple(attrs.evolve(f, in_title=True) for f in scan_text(upload.display_name))
    findings = (in_title + scan_text(extraction.text))[:MAX_FINDINGS]
    if findings and policy is ScanPolicy.REJECT:
        return _Extracted(text=extraction.text, findings=findings, segments=())
    segments = tuple(
        StoredSegment(
            ordinal=s.ordinal,
            label=s.label,
            body=s.body(extraction.text),
            indexed=s.indexed_text(extraction.text),
        )
        for s in segment_extraction(extraction)
    )
    return _Extracted(text=extraction.text, findings=findings, segments=segments)


async def _after_indexed(hook: IndexedHook, claim: Claim, content: IndexedContent) -> None:
    try:
        await hook(claim, content)
    except Exception as exc:  # the document is indexed whatever follows
        # By type only: a message could quote the document.
        _log.warning(
            "after indexing document %s of tenant %s: %s (the document stays indexed)",
            claim.document_id,
            claim.tenant_id,
            type(exc).__name__,
        )


def _count(tally: _Tally, owned: bool, outcome: str, tenant_id: str) -> None:
    if not owned:
        tally.lost += 1  # the lease was lost: the retry's outcome stands, not ours
        count_ingestion(tenant_id, "lost")
        return
    setattr(tally, outcome, getattr(tally, outcome) + 1)
    count_ingestion(tenant_id, outcome)
