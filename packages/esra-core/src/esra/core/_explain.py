"""Operator explain: what the pipeline decided for one invocation, for an operator only.

``Retriever.explain`` runs an invocation exactly as ``retrieve`` would (the same scope,
model calls, validation and execution; only the result cache is bypassed, so the stages
really run) while an ``ExplainRecorder`` is current. The recorder keeps:

- every audit record the invocation wrote — the scope funnel with its four levels and
  health, the selection and its candidates, each plan rejection with its reason code, each
  failed query, the answer gating — as *decisions*, in order;
- every plan the model (or the template fallback) made, every validated query with its
  statement as rendered (text and parameter names, never values) and its row count;
- the candidates' normalised and weighted scores, the rerank's semantic and final scores,
  the final order and which results the size cap let through, each result named by its
  record key only where a caller would see that key (see "Record keys" below);
- the time each stage took, on the retriever's clock.

The explanation is a value returned to the caller of ``explain`` — the admin API, the
``esra explain`` command and the portal, each behind an operator role. It is never written
into a prompt and never into an MCP response: nothing in the pipeline reads the recorder.
Audit records of an explained invocation go to the audit trail as usual, marked
``explain: true`` with ``explained_by`` (the operator), so a caller's own history is never
confused with an operator's rehearsal of it.

The recorder is found through a context variable, so the stages keep their signatures and
an invocation that is not explained pays one context-variable read per audit record.

Record keys: a record key is source-internal data (spec 000), and field projection and
masking hold in every diagnostic (spec 003). A result's key is shown as it is only when its
mapping would show the key column to a caller, unmasked: some field over the column is
returnable, and no field over it is restricted or masked. Any other key is withheld: the
explanation shows ``withheld:`` and an HMAC-SHA256 of the result's source, mapping and key
under a random secret that lives as long as the recorder. Readers still tell results apart
(distinct records, distinct stand-ins), but nobody can recompute a stand-in from a guessed
key — a plain hash of a nine-digit SSN is undone by trying them all — and two explanations
of the same record cannot be linked.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import hmac
import secrets
from collections.abc import Iterator, Mapping, Sequence

import attrs

from esra.core._audit.record import AuditDimension, AuditRecord
from esra.core._config.mapping import Mapping as SearchMapping
from esra.core._pipeline.aggregation import Candidate
from esra.core._pipeline.execution import ExecutionOutcome
from esra.core._pipeline.rerank import RankedCandidate
from esra.core._pipeline.validation import ValidationOutcome
from esra.core._pipeline.values import ValidatedQuery
from esra.core._query import PlannedQuery
from esra.core._response import RetrievalResponse
from esra.core.ports import AuditSink, Clock, RenderedStatement, SearchProvider, StatementRenderer

__all__ = [
    "WITHHELD_KEY_PREFIX",
    "Decision",
    "ExplainRecorder",
    "ExplainedQuery",
    "ExplainingAuditSink",
    "Explanation",
    "PlannedSearch",
    "RankedResult",
    "StageTime",
    "ValidationDecision",
    "current_recorder",
]

EXPLAIN_MARK = "explain"
EXPLAINED_BY = "explained_by"
# What a withheld record key's stand-in starts with (see "Record keys" in the docstring).
WITHHELD_KEY_PREFIX = "withheld:"
# 64 bits of the digest: no two of one explanation's few hundred candidates share them.
_STAND_IN_HEX_CHARS = 16

_CURRENT: contextvars.ContextVar[ExplainRecorder | None] = contextvars.ContextVar(
    "esra_explain_recorder", default=None
)


@attrs.frozen
class StageTime:
    """How long one stage took, in milliseconds of the retriever's monotonic clock."""

    stage: str
    elapsed_ms: float


@attrs.frozen
class Decision:
    """One audit record the invocation wrote: its event, outcome, reason and dimensions."""

    event: str
    outcome: str
    reason: str | None
    dimensions: Mapping[str, AuditDimension]


@attrs.frozen
class PlannedSearch:
    """One search as planned, before validation: the model's (or the fallback's) words."""

    source_id: str
    mapping_id: str
    strategy: str
    required_terms: tuple[str, ...]
    optional_terms: tuple[str, ...]
    excluded_terms: tuple[str, ...]
    phrases: tuple[str, ...]
    filters: tuple[str, ...]  # "field operator", the values left out
    limit: int | None


@attrs.frozen
class ValidationDecision:
    """The validator's verdict on one planned search: accepted, or rejected with a code."""

    source_id: str
    mapping_id: str
    outcome: str  # "accepted" or "rejected"
    reason: str | None = None


@attrs.frozen
class ExplainedQuery:
    """One validated query: its statement as rendered, and what running it gave."""

    query_id: str
    source_id: str
    mapping_id: str
    strategy: str
    statement: RenderedStatement | None  # None: the provider cannot render statements
    rows: int | None  # None: not run, or its source failed (see ``failure``)
    failure: str | None = None


@attrs.frozen
class RankedResult:
    """One candidate in the final order: every score that put it there."""

    position: int
    result_id: str
    source_id: str
    mapping_id: str
    key: str  # the record key, or its stand-in when ``key_withheld``
    key_withheld: bool  # a caller would not see the key (see "Record keys" above)
    normalized: float  # the best of its queries' normalised scores
    weighted: float  # the best weighted score (strategy and source priority applied)
    bonus: float  # agreement and freshness bonus
    semantic: float | None  # the rerank model's score, None when it did not score it
    final: float
    returned: bool  # whether it survived the response's size cap


@attrs.frozen
class Explanation:
    """What the pipeline decided for one explained invocation."""

    tenant_id: str
    exposure: str
    correlation_id: str
    status: str  # the response's status, or "error" when the invocation raised
    error: str | None  # the classified code of the error it raised
    decisions: tuple[Decision, ...]
    plans: tuple[PlannedSearch, ...]
    validation: tuple[ValidationDecision, ...]
    queries: tuple[ExplainedQuery, ...]
    candidates: int
    ranking: tuple[RankedResult, ...]
    warnings: tuple[str, ...]
    stages: tuple[StageTime, ...]


class ExplainRecorder:
    """Collects one invocation's decisions while it runs (see the module docstring)."""

    def __init__(self, *, clock: Clock, explained_by: str) -> None:
        self._clock = clock
        self.explained_by = explained_by
        self._decisions: list[Decision] = []
        self._stages: list[StageTime] = []
        self._plans: list[PlannedSearch] = []
        self._validation: list[ValidationDecision] = []
        self._queries: dict[str, ExplainedQuery] = {}
        self._validated: dict[str, ValidatedQuery] = {}
        self._candidates = 0
        self._ranking: list[RankedResult] = []
        # Keys the withheld keys' stand-ins; never leaves the recorder (see the docstring).
        self._stand_in_secret = secrets.token_bytes(32)

    @contextlib.contextmanager
    def active(self) -> Iterator[ExplainRecorder]:
        """Make this the current recorder for the code run inside the block."""
        token = _CURRENT.set(self)
        try:
            yield self
        finally:
            _CURRENT.reset(token)

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time the stage run inside the block (kept even when it raises)."""
        started = self._clock.monotonic()
        try:
            yield
        finally:
            elapsed = (self._clock.monotonic() - started) * 1000
            self._stages.append(StageTime(name, round(elapsed, 3)))

    def saw_record(self, record: AuditRecord) -> None:
        """Keep one audit record of the invocation as a decision."""
        self._decisions.append(
            Decision(
                event=record.event.value,
                outcome=record.outcome,
                reason=record.reason,
                dimensions=dict(record.dimensions),
            )
        )

    def saw_plans(self, queries: Sequence[PlannedQuery]) -> None:
        """Keep every planned search, as planned."""
        self._plans.extend(_planned(query) for query in queries)

    def saw_validation(self, outcome: ValidationOutcome) -> None:
        """Keep the validator's verdicts and the queries it let through."""
        for query in outcome.queries:
            self._validation.append(
                ValidationDecision(query.source_id, query.mapping.id, outcome="accepted")
            )
            self._validated[query.query_id] = query
            self._queries[query.query_id] = ExplainedQuery(
                query_id=query.query_id,
                source_id=query.source_id,
                mapping_id=query.mapping.id,
                strategy=query.strategy.value,
                statement=None,
                rows=None,
            )
        self._validation.extend(
            ValidationDecision(r.source_id, r.mapping_id, "rejected", r.reason.value)
            for r in outcome.rejections
        )

    def saw_execution(
        self, outcome: ExecutionOutcome, providers: Mapping[str, SearchProvider]
    ) -> None:
        """Keep each query's statement as rendered, its rows, and each source's failure.

        Rendered after execution: a provider may learn its dialect at its first connection.
        """
        for query_id, query in self._validated.items():
            statement = _rendered(providers.get(query.source_id), query)
            self._queries[query_id] = attrs.evolve(self._queries[query_id], statement=statement)
        for result in outcome.results:
            known = self._queries.get(result.query.query_id)
            if known is not None:
                self._queries[known.query_id] = attrs.evolve(known, rows=len(result.rows))
        failed = {failure.source_id: failure.code.value for failure in outcome.failures}
        for query_id, explained in self._queries.items():
            if explained.rows is None and explained.source_id in failed:
                failure = failed[explained.source_id]
                self._queries[query_id] = attrs.evolve(explained, failure=failure)

    def saw_candidates(self, count: int) -> None:
        """Keep how many candidates aggregation merged the rows into."""
        self._candidates = count

    def saw_ranking(self, ranked: Sequence[RankedCandidate], response: RetrievalResponse) -> None:
        """Keep the final order with every score, and which results were returned."""
        returned = {item.result_id for item in response.results}
        self._ranking = [
            self._ranked(position, entry, returned=entry.result_id in returned)
            for position, entry in enumerate(ranked, start=1)
        ]

    def _ranked(self, position: int, entry: RankedCandidate, *, returned: bool) -> RankedResult:
        candidate = entry.candidate
        withheld = not _shows_record_key(candidate.mapping)
        key = self._stand_in(candidate) if withheld else candidate.key
        return RankedResult(
            position=position,
            result_id=entry.result_id,
            source_id=candidate.source_id,
            mapping_id=candidate.mapping.id,
            key=key,
            key_withheld=withheld,
            normalized=max((p.normalized for p in candidate.provenance), default=0.0),
            weighted=candidate.best_weighted,
            bonus=candidate.bonus,
            semantic=entry.semantic,
            final=entry.final,
            returned=returned,
        )

    def _stand_in(self, candidate: Candidate) -> str:
        # Length-prefixed parts: ("a", "bc") and ("ab", "c") must not digest alike.
        message = b"".join(
            len(encoded).to_bytes(4, "big") + encoded
            for encoded in (
                part.encode("utf-8", "surrogatepass")
                for part in (candidate.source_id, candidate.mapping.id, candidate.key)
            )
        )
        digest = hmac.new(self._stand_in_secret, message, hashlib.sha256).hexdigest()
        return WITHHELD_KEY_PREFIX + digest[:_STAND_IN_HEX_CHARS]

    def explanation(
        self,
        *,
        tenant_id: str,
        exposure: str,
        correlation_id: str,
        response: RetrievalResponse | None,
        error: str | None = None,
    ) -> Explanation:
        """Everything recorded, as one value."""
        return Explanation(
            tenant_id=tenant_id,
            exposure=exposure,
            correlation_id=correlation_id,
            status=response.status.value if response is not None else "error",
            error=error,
            decisions=tuple(self._decisions),
            plans=tuple(self._plans),
            validation=tuple(self._validation),
            queries=tuple(self._queries.values()),
            candidates=self._candidates,
            ranking=tuple(self._ranking),
            warnings=tuple(w.code.value for w in response.warnings) if response else (),
            stages=tuple(self._stages),
        )


def current_recorder() -> ExplainRecorder | None:
    """The recorder of the invocation being explained, or ``None`` (the usual case)."""
    return _CURRENT.get()


class ExplainingAuditSink:
    """Forwards every record; while an invocation is explained, marks it and keeps a copy.

    The mark (``explain: true``, ``explained_by``) tells a reader of the audit trail that the
    caller named in the record did not run this search: an operator rehearsed it.
    """

    def __init__(self, inner: AuditSink) -> None:
        self._inner = inner

    async def record(self, record: AuditRecord) -> None:
        recorder = _CURRENT.get()
        if recorder is not None:
            record = attrs.evolve(
                record,
                dimensions={
                    **record.dimensions,
                    EXPLAIN_MARK: True,
                    EXPLAINED_BY: recorder.explained_by,
                },
            )
            recorder.saw_record(record)
        await self._inner.record(record)


def _planned(query: PlannedQuery) -> PlannedSearch:
    return PlannedSearch(
        source_id=query.source_id,
        mapping_id=query.mapping_id,
        strategy=query.strategy,
        required_terms=query.required_terms,
        optional_terms=query.optional_terms,
        excluded_terms=query.excluded_terms,
        phrases=query.phrases,
        filters=tuple(f"{f.field} {f.operator}" for f in query.filters),
        limit=query.limit,
    )


def _rendered(provider: object, query: ValidatedQuery) -> RenderedStatement | None:
    if not isinstance(provider, StatementRenderer):
        return None
    try:
        return provider.render_statement(query)
    except Exception:  # explaining must never fail the explained invocation
        return None


def _shows_record_key(mapping: SearchMapping) -> bool:
    """Whether a caller would see ``mapping``'s record key column, unmasked.

    Some field over the column must be in the returnable allowlist, and none may be
    restricted or masked: a field that shows the column does not undo another's hiding it.
    """
    over_key = [spec for spec in mapping.fields if spec.column == mapping.record_key]
    returnable = {spec.name for spec in mapping.returnable_fields()}
    return any(spec.name in returnable for spec in over_key) and not any(
        spec.is_restricted or mapping.is_masked(spec.name) for spec in over_key
    )
