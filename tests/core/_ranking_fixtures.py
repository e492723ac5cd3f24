"""Private builders for the aggregation, rerank and response tests.

Queries are issued through ``esra.core._pipeline.values._issue``: a test-only use of the validator's
private issuer, so these stages can be tested without depending on the validator's rules.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from collections.abc import Mapping as AbcMapping
from typing import Any

from esra.core._pipeline.aggregation import Candidate, Provenance
from esra.core._pipeline.execution import QueryResult
from esra.core._pipeline.rerank import RankedCandidate
from esra.core._pipeline.scope import EffectiveScope
from esra.core._pipeline.values import ValidatedQuery, _issue
from esra.core._query import ProjectedField, ResultRow, RowValue, Strategy
from esra.core.config import (
    Capability,
    CapabilityLimits,
    Exposure,
    FieldSpec,
    FieldType,
    Mapping,
    MaskingRule,
    ResponseMode,
    SourceBinding,
)
from esra.core.prompts import Prompt

TENANT = "tenant-r"


def field(
    name: str,
    *,
    type: FieldType = FieldType.TEXT,
    returnable: bool = True,
    restricted: bool = False,
) -> FieldSpec:
    """Build a field whose physical column is ``phys_{name}``."""
    return FieldSpec(
        name=name,
        column=f"phys_{name}",
        type=type,
        is_searchable=True,
        is_returnable=returnable,
        is_restricted=restricted,
    )


def mapping(
    mapping_id: str = "m-docs",
    source_id: str = "s-a",
    *,
    masking: Iterable[MaskingRule] = (),
    freshness: bool = False,
) -> Mapping:
    """Build a mapping with title/body, a few plain fields, a restricted and a hidden field."""
    return Mapping(
        id=mapping_id,
        tenant_id=TENANT,
        source_id=source_id,
        business_name="Documents",
        description="Documents",
        relation="phys_documents",
        record_key="phys_doc_key",
        title_field="title",
        content_fields=("body",),
        fields=(
            field("title"),
            field("body"),
            field("owner_email"),
            field("account"),
            field("updated", type=FieldType.DATE),
            field("approved", type=FieldType.BOOLEAN),
            field("pages", type=FieldType.INTEGER),
            field("salary", restricted=True),
            field("internal_note", returnable=False),
        ),
        masking=tuple(masking),
        freshness_field="updated" if freshness else None,
    )


def query(
    query_id: str,
    m: Mapping,
    *,
    strategy: Strategy = Strategy.KEYWORD,
    required: Sequence[str] = (),
    optional: Sequence[str] = (),
    excluded: Sequence[str] = (),
    phrases: Sequence[str] = (),
    freshness: bool = False,
) -> ValidatedQuery:
    """Issue a ``ValidatedQuery`` directly (test-only use of the private issuer)."""
    return _issue(
        query_id=query_id,
        source_id=m.source_id,
        mapping=m,
        strategy=strategy,
        required_terms=tuple(required),
        optional_terms=tuple(optional),
        excluded_terms=tuple(excluded),
        phrases=tuple(phrases),
        filters=(),
        record_filters=(),
        projection=tuple(ProjectedField(f.name, f.column) for f in m.returnable_fields()),
        freshness=ProjectedField("updated", "phys_updated") if freshness else None,
        row_limit=50,
    )


def result(
    q: ValidatedQuery, rows: Iterable[tuple[str, float, AbcMapping[str, RowValue]]]
) -> QueryResult:
    """Build a query result from ``(key, native score, values)`` triples."""
    return QueryResult(
        query=q, rows=tuple(ResultRow(key=k, score=s, values=dict(v)) for k, s, v in rows)
    )


def candidate(
    source_id: str,
    key: str,
    weighted: float,
    *,
    m: Mapping | None = None,
    values: AbcMapping[str, RowValue] | None = None,
    terms: Sequence[str] = (),
    native: float = 1.0,
) -> Candidate:
    """Build a candidate with ``weighted`` as its best weighted score and no bonus."""
    the_mapping = m or mapping(source_id=source_id)
    return Candidate(
        source_id=source_id,
        mapping=the_mapping,
        key=key,
        values=dict(values) if values is not None else {"title": f"Title {key}", "body": key},
        best_weighted=weighted,
        bonus=0.0,
        provenance=(Provenance(f"{source_id}#1", Strategy.KEYWORD, native, weighted, weighted),),
        matched_terms=tuple(terms),
    )


def ranked(c: Candidate, result_id: str, final: float) -> RankedCandidate:
    """Wrap a candidate as a reranked one with a given final score."""
    return RankedCandidate(candidate=c, result_id=result_id, semantic=None, final=final)


def scope(
    *, top_k: int = 10, size_cap_chars: int = 20_000, fragment_chars: int = 400
) -> EffectiveScope:
    """Build an effective scope whose exposure has the given response bounds."""
    capability = Capability(
        id="cap-r", tenant_id=TENANT, name="Ranking", bindings=(SourceBinding("s-a"),)
    )
    exposure = Exposure(
        id="exp-r",
        tenant_id=TENANT,
        slug="ranking",
        capability_id="cap-r",
        audience=frozenset({"app"}),
        published=True,
        top_k=top_k,
        size_cap_chars=size_cap_chars,
        fragment_chars=fragment_chars,
    )
    return EffectiveScope(
        exposure=exposure,
        capability=capability,
        sources=(),
        limits=CapabilityLimits(),
        response_modes=frozenset({ResponseMode.RESULTS}),
        config_version="v1",
    )


def item_ids(prompt: Prompt) -> list[str]:
    """Return the result ids of a rerank prompt's reference items, in order."""
    return [str(json.loads(item.content)["id"]) for item in prompt.reference]


def item_payloads(prompt: Prompt) -> list[dict[str, Any]]:
    """Return the decoded JSON payload of every reference item."""
    return [json.loads(item.content) for item in prompt.reference]


def scoring(score: Callable[[dict[str, Any]], float | None]) -> Callable[[Prompt], str]:
    """Return a rerank responder scoring each item with ``score`` (``None`` omits it)."""

    def respond(prompt: Prompt) -> str:
        scores = []
        for payload in item_payloads(prompt):
            value = score(payload)
            if value is not None:
                scores.append({"id": payload["id"], "score": value})
        return json.dumps({"scores": scores})

    return respond


__all__ = [
    "TENANT",
    "candidate",
    "field",
    "item_ids",
    "item_payloads",
    "mapping",
    "query",
    "ranked",
    "result",
    "scope",
    "scoring",
]
