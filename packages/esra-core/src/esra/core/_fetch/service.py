"""DocumentFetcher: ``esra_{slug}_fetch`` — more of one surfaced record, the whole chain re-run.

A ``document_ref`` identifies; it never authorizes. Every fetch re-checks, in order:

1. the exposure is still published, its access policy still admits this caller and it
   enables fetch — otherwise the fetch tool does not exist (``ESRA_EXPOSURE_NOT_FOUND``);
2. the reference opens for this tenant, exposure and caller (``ESRA_DOCUMENT_NOT_FOUND``);
3. the record's source is still in the caller's effective scope and its mapping still
   belongs to it (``ESRA_DOCUMENT_NOT_FOUND``: a permission error would confirm existence);
4. the record filters, bound to the caller's *current* claims, still admit the record — they
   are part of the executed query, so a record they exclude is simply not found;
5. the field allowlist and masking are applied again to what is returned, and the response
   — title, fields and page together, counted as search counts a result — fits the
   exposure's size cap: the page gets what the title and fields leave of it, and a record
   whose title and fields leave no room for one character of its text is not served
   (``ESRA_DOCUMENT_NOT_FOUND``, as search under that cap would drop it);
6. the caller's hourly character quota has room for what is returned — the page, the title
   and the fields (``ESRA_FETCH_QUOTA_EXCEEDED``).

Every fetch, refused or not, is one ``esra.fetch`` audit record.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import TypeGuard

from esra.core._audit.record import AuditDimension, AuditRecord
from esra.core._clock import SystemClock
from esra.core._config.client_snapshot import ClientSnapshotCache
from esra.core._config.snapshot import ConfigSnapshot
from esra.core._config.source import SourceHealth
from esra.core._context import InvocationContext
from esra.core._docstore.fetch import page_text
from esra.core._fetch.result import FetchedDocument
from esra.core._fetch.tokens import DocumentLocator, Keyring, TokenBinding
from esra.core._fetch.tokens import open as open_ref
from esra.core._fragments import content_text
from esra.core._masking import PART_SEPARATOR, masked_record
from esra.core._pipeline.execution import Executor
from esra.core._pipeline.invocation import Invocation
from esra.core._pipeline.metrics import count_fetch_quota_refusal
from esra.core._pipeline.respond import allowlisted_row_values, carried_chars
from esra.core._pipeline.scope import EffectiveScope, ScopedSource, admitted_exposure, resolve_scope
from esra.core._pipeline.validation import MAX_LOOKUP_PARTS, validate_lookup
from esra.core._pipeline.values import ValidatedQuery
from esra.core._query import ResultRow
from esra.core.codes import AuditEvent
from esra.core.exceptions import (
    DocumentNotFoundError,
    EsraError,
    ExposureNotFoundError,
    FetchQuotaExceededError,
    InvalidRequestError,
    NoSourcesAvailableError,
    QuotaUnavailableError,
    SourceUnavailableError,
)
from esra.core.ports import AuditSink, Clock, ConfigRepository, QuotaStore, SearchProvider

__all__ = [
    "DEFAULT_FETCH_CHARS",
    "DEFAULT_HOURLY_FETCH_CHARS",
    "DocumentFetcher",
]

DEFAULT_FETCH_CHARS = 8_000
DEFAULT_HOURLY_FETCH_CHARS = 200_000
# Parts of one record are concatenated as they are (``PART_SEPARATOR``). The content fields
# of one row are joined by ``content_text`` with a space, as for a search result's content,
# so a one-row record's fetched text is the very string its result's content and fragment
# were cut from.

_log = logging.getLogger(__name__)
_MAX_AUDITED_OFFSET = 2**63 - 1


class DocumentFetcher:
    """Serves ``esra_{slug}_fetch`` for one runtime instance, through the same ports as search.

    Args:
        config: where tenant snapshots come from (the same repository as the Retriever's).
        providers: the search provider of each source, keyed by source id; kept, not
            copied, like the Retriever's (a publication applied live changes it).
        audit: where the ``esra.fetch`` records go.
        keyring: the keys references were minted with (rotation: old keys stay to decrypt).
        quota: the per-caller hourly character budget.
        hourly_chars: each caller's budget per hour, within a tenant.
        clock: time source (defaults to the system clock).
        executor: share the Retriever's (``Retriever.executor``) so a source's circuit
            breaker and concurrency bounds cover fetches too; a private one otherwise.
        tenant_id: the one tenant this instance serves, as for ``Retriever``.
    """

    def __init__(
        self,
        *,
        config: ConfigRepository,
        providers: Mapping[str, SearchProvider],
        audit: AuditSink,
        keyring: Keyring,
        quota: QuotaStore,
        hourly_chars: int = DEFAULT_HOURLY_FETCH_CHARS,
        clock: Clock | None = None,
        executor: Executor | None = None,
        tenant_id: str | None = None,
    ) -> None:
        # An integer, checked before it is compared: NaN or infinity would compare below every
        # amount spent, and so grant every fetch — governance fails closed instead.
        if not _is_int(hourly_chars) or hourly_chars < 1:
            msg = "hourly_chars must be a positive integer"
            raise ValueError(msg)
        self._config = config
        self._client_snapshots = ClientSnapshotCache()
        self._providers = providers
        self._audit = audit
        self._keyring = keyring
        self._quota = quota
        self._hourly_chars = hourly_chars
        self._clock = clock or SystemClock()
        self._executor = executor or Executor(clock=self._clock)
        self._tenant_id = tenant_id

    async def fetch(
        self,
        ctx: InvocationContext,
        document_ref: str,
        *,
        offset: int = 0,
        max_chars: int = DEFAULT_FETCH_CHARS,
    ) -> FetchedDocument:
        """Return up to ``max_chars`` of the record ``document_ref`` names, from ``offset``.

        ``max_chars`` is further capped by what the title and fields leave of the exposure's
        size cap: the whole response fits it.

        Raises:
            InvalidRequestError: ``offset`` or ``max_chars`` is not an integer (a bool, a float
                or NaN included), ``offset`` is negative or ``max_chars`` is not positive.
            ExposureNotFoundError: no fetch tool on this exposure for this caller.
            DocumentNotFoundError: the reference does not name a record this caller may
                read now — for every reason alike, a record whose title and fields leave no
                room under the size cap for any of its text included.
            SourceUnavailableError: the record's source failed or is down; retry later.
            FetchQuotaExceededError: what is returned (page, title and fields) would exceed
                the caller's hourly budget.
            EsraError: ``ESRA_INTERNAL`` for anything unclassified (detail logged only).
        """
        # Only an integer offset an audit store can hold is an audit dimension: anything else
        # is the caller's object, and an integer of thousands of digits fails the JSON
        # encoding every durable audit sink applies.
        audit = _FetchAudit(ctx, self._clock, offset if _is_auditable_int(offset) else None)
        try:
            # Inside the audited block: a refused fetch is a record too, whatever refused it.
            # Types first: a float would crash the slicing into ESRA_INTERNAL, and a bool or
            # NaN would be served as if it were a number.
            if not (_is_int(offset) and _is_int(max_chars)) or offset < 0 or max_chars < 1:
                msg = "offset must be an integer of 0 or more and max_chars one of at least 1."
                raise InvalidRequestError(msg)
            document = await self._fetch(ctx, document_ref, offset, max_chars, audit)
        except EsraError as exc:
            await self._audit.record(audit.refused(exc))
            raise
        except Exception as exc:
            _log.exception("unclassified failure in fetch %s", ctx.correlation_id)
            failure = EsraError()
            await self._audit.record(audit.refused(failure))
            raise failure from exc
        await self._audit.record(audit.served(document))
        return document

    @property
    def executor(self) -> Executor:
        """The executor fetches run through."""
        return self._executor

    async def _fetch(
        self,
        ctx: InvocationContext,
        document_ref: str,
        offset: int,
        max_chars: int,
        audit: _FetchAudit,
    ) -> FetchedDocument:
        snapshot = await self._admitted_snapshot(ctx)
        exposure = admitted_exposure(ctx, snapshot)
        if exposure is None or not exposure.fetch_enabled:
            raise ExposureNotFoundError
        locator = open_ref(
            document_ref,
            binding=TokenBinding.for_caller(ctx, exposure.id),
            keyring=self._keyring,
            clock=self._clock,
        )
        scope, scoped = await self._scoped_source(ctx, snapshot, locator)
        audit.source_id = scoped.source.id
        audit.mapping_id = locator.mapping_id
        query = validate_lookup(
            ctx, scoped, mapping_id=locator.mapping_id, record_key=locator.record_key
        )
        if query is None:
            raise DocumentNotFoundError
        await self._refuse_a_spent_budget(ctx)
        rows = await self._read(query, scope)
        if not rows:
            raise DocumentNotFoundError
        mapping = query.mapping
        # The lookup reads one part past the cap: more than the cap came back only when the
        # record holds more parts than a fetch may read.
        complete = mapping.part_order_column is None or len(rows) <= MAX_LOOKUP_PARTS
        parts = masked_record(
            [allowlisted_row_values(row.values, mapping) for row in rows[:MAX_LOOKUP_PARTS]],
            mapping,
        )
        text = PART_SEPARATOR.join(content_text(p, mapping) for p in parts)
        title = parts[0].get(mapping.title_field, "")
        fields = _shared_fields(parts, shown={mapping.title_field, *mapping.content_fields})
        # The size cap bounds the whole response, counted as search's size cap counts a
        # result: the page gets what the title and fields leave of it.
        carried = carried_chars(title, fields)
        room = exposure.size_cap_chars - carried
        if room < min(1, len(text)):
            # No room for one character of the text (the cap was lowered since the search,
            # which under this cap would drop the record too): any page would be over the
            # cap, or empty with more to come for ever. Refused whatever the offset, like
            # every record this caller cannot be shown now, and before any quota is spent.
            audit.over_size_cap(carried, exposure.size_cap_chars)
            raise DocumentNotFoundError
        page = page_text(text, offset=offset, max_chars=min(max_chars, room))
        # Every character the response carries is charged, title and fields with every page:
        # charging the text alone let a caller whose budget is spent read a record's fields
        # again and again through empty pages.
        charged = len(page.text) + carried
        if not await self._quota.consume(
            ctx.tenant_id, ctx.caller.key, charged, self._hourly_chars
        ):
            count_fetch_quota_refusal(ctx.tenant_id)
            raise FetchQuotaExceededError
        return FetchedDocument(
            source=scoped.source.name,
            title=title,
            text=page.text,
            offset=page.offset,
            total_chars=page.total_chars if complete else None,
            # Past the parts read there is nothing a fetch can serve: the empty page there
            # ends the paging instead of pointing at itself forever.
            has_more=page.has_more or (not complete and bool(page.text)),
            correlation_id=ctx.correlation_id,
            fields=fields,
        )

    async def _refuse_a_spent_budget(self, ctx: InvocationContext) -> None:
        """Refuse a caller with no character left this hour before the source is read.

        Every response costs at least its title and fields, so with the budget spent the
        fetch is refused anyway — but only after reading the whole record (up to
        ``MAX_LOOKUP_PARTS`` rows) each time. Asked first, a spent budget costs the source
        nothing, and reads the same whether or not the record is still there. Consuming
        nothing within one character less than the budget spends nothing and succeeds
        exactly when at least one character is left, on any ``QuotaStore``.
        """
        if not await self._quota.consume(ctx.tenant_id, ctx.caller.key, 0, self._hourly_chars - 1):
            count_fetch_quota_refusal(ctx.tenant_id)
            raise FetchQuotaExceededError

    async def _admitted_snapshot(self, ctx: InvocationContext) -> ConfigSnapshot:
        if self._tenant_id is not None and ctx.tenant_id != self._tenant_id:
            raise ExposureNotFoundError
        snapshot = await self._config.snapshot(ctx.tenant_id)
        if snapshot is None:
            raise ExposureNotFoundError
        # The runtime snapshot of the caller's client application, as the search tool's.
        return self._client_snapshots.of(snapshot, ctx.client_app_id)

    async def _scoped_source(
        self, ctx: InvocationContext, snapshot: ConfigSnapshot, locator: DocumentLocator
    ) -> tuple[EffectiveScope, ScopedSource]:
        """The record's source as the caller's effective scope holds it now.

        Scope is resolved as if the source were healthy, so that a source the caller may no
        longer use is "not found" whatever its health; only a source still in scope is then
        reported unavailable when it is down.
        """
        invocation = Invocation.start(ctx, clock=self._clock, audit=self._audit)
        try:
            scope = await resolve_scope(
                invocation, snapshot, health={locator.source_id: SourceHealth.HEALTHY}
            )
        except NoSourcesAvailableError:
            raise DocumentNotFoundError from None
        finally:
            # Scope resolution's decisions are audited before the fetch's own record.
            await invocation.audit.write()
        scoped = scope.by_id(locator.source_id)
        if scoped is None:
            raise DocumentNotFoundError
        if scoped.source.health is SourceHealth.UNAVAILABLE:
            raise SourceUnavailableError
        return scope, scoped

    async def _read(self, query: ValidatedQuery, scope: EffectiveScope) -> Sequence[ResultRow]:
        names = {s.source.id: s.source.name for s in scope.sources}
        try:
            async with asyncio.timeout(scope.limits.invocation_timeout_s):
                outcome = await self._executor.execute(
                    [query], providers=self._providers, limits=scope.limits, source_names=names
                )
        except TimeoutError:
            raise SourceUnavailableError from None
        if outcome.failures or not outcome.results:
            raise SourceUnavailableError
        return outcome.results[0].rows


def _is_int(value: object) -> TypeGuard[int]:
    """Whether ``value`` is an integer, and not a bool (which Python counts as one)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _is_auditable_int(value: object) -> bool:
    """Whether ``value`` is an integer a signed 64-bit audit column or JSON reader can hold."""
    return _is_int(value) and abs(value) <= _MAX_AUDITED_OFFSET


def _shared_fields(parts: Sequence[Mapping[str, str]], *, shown: set[str]) -> dict[str, str]:
    """Fields every part agrees on (a record's, not one part's), minus title and content."""
    first = parts[0]
    return {
        name: value
        for name, value in first.items()
        if name not in shown and all(p.get(name) == value for p in parts[1:])
    }


class _FetchAudit:
    """Collects what one fetch may record: never the record key, never any text."""

    def __init__(self, ctx: InvocationContext, clock: Clock, offset: int | None) -> None:
        self._ctx = ctx
        self._clock = clock
        self._offset = offset
        # Set only once the source is known to be in the caller's scope: an unauthorized
        # source never becomes an audit dimension, even the one a valid reference names.
        self.source_id: str | None = None
        self.mapping_id: str | None = None
        # Why a record in scope was still "not found": the caller never learns it, the
        # operator does (raise the cap, or return fewer fields).
        self._size_cap: dict[str, AuditDimension] = {}

    def over_size_cap(self, carried: int, size_cap: int) -> None:
        """Record that the title and fields alone (``carried``) left no room under the cap."""
        self._size_cap = {"size_cap_chars": size_cap, "carried_chars": carried}

    def _dimensions(self, **extra: AuditDimension) -> dict[str, AuditDimension]:
        dimensions: dict[str, AuditDimension] = {
            "exposure": self._ctx.exposure_slug,
            "client_app": self._ctx.client_app_id,
            "offset": self._offset,
        }
        if self.source_id is not None:
            dimensions["source_id"] = self.source_id
            dimensions["mapping_id"] = self.mapping_id
        dimensions.update(extra)
        return dimensions

    def served(self, document: FetchedDocument) -> AuditRecord:
        return AuditRecord.of(
            self._ctx,
            self._clock,
            AuditEvent.FETCH,
            dimensions=self._dimensions(
                chars=len(document.text),
                total_chars=document.total_chars,
                has_more=document.has_more,
            ),
        )

    def refused(self, error: EsraError) -> AuditRecord:
        # A source or the quota store that could not answer failed the fetch; a request for
        # no page at all was rejected (the search path's word for its invalid requests); the
        # rest denied it.
        unavailable = isinstance(error, SourceUnavailableError | QuotaUnavailableError)
        outcome = "failed" if unavailable else "denied"
        if type(error) is EsraError:
            outcome = "failed"
        elif isinstance(error, InvalidRequestError):
            outcome = "rejected"
        return AuditRecord.of(
            self._ctx,
            self._clock,
            AuditEvent.FETCH,
            outcome=outcome,
            reason=error.code.value,
            dimensions=self._dimensions(**self._size_cap),
        )
