"""Stage 8 — respond: top-K, then field allowlist → masking → size cap → error sanitization.

The order is the point: the allowlist runs first so a field a provider should never have
returned cannot reach anything later; masking runs before the size cap so only masked text is
ever measured, cut or returned; sanitization runs last so it also covers the size cap's own
warning.
"""

from __future__ import annotations

from collections.abc import Mapping as AbcMapping
from collections.abc import Sequence

import attrs

from esra.core._config.mapping import Mapping
from esra.core._fetch.refs import DocumentRefMinter
from esra.core._fetch.tokens import DocumentLocator
from esra.core._fragments import collapsed, content_text, make_fragment
from esra.core._masking import masked_values
from esra.core._pipeline.aggregation import Candidate
from esra.core._pipeline.rerank import RankedCandidate
from esra.core._pipeline.scope import EffectiveScope
from esra.core._query import RowValue
from esra.core._response import ResponseStatus, ResponseWarning, ResultItem, RetrievalResponse
from esra.core.codes import WarningCode

__all__ = [
    "FRAGMENT_FLOOR_CHARS",
    "MAX_WARNING_CHARS",
    "allowlisted_row_values",
    "allowlisted_values",
    "carried_chars",
    "respond",
    "sanitize_text",
    "sanitize_warnings",
]

MAX_WARNING_CHARS = 300
# The size cap shortens fragments no further than this before it drops whole results: a
# fragment shorter than a sentence no longer tells the caller why the result matched.
FRAGMENT_FLOOR_CHARS = 40


def allowlisted_values(candidate: Candidate) -> dict[str, RowValue]:
    """Return the candidate's values for fields its mapping lets a response carry."""
    return allowlisted_row_values(candidate.values, candidate.mapping)


def allowlisted_row_values(
    values: AbcMapping[str, RowValue], mapping: Mapping
) -> dict[str, RowValue]:
    """Return ``values`` for the fields ``mapping`` lets a response carry.

    A field the mapping does not know, or marks restricted or not returnable, is dropped even
    if a provider returned it.
    """
    kept: dict[str, RowValue] = {}
    for name, value in values.items():
        spec = mapping.field(name)
        if spec is not None and spec.is_returnable and not spec.is_restricted:
            kept[name] = value
    return kept


def carried_chars(title: str, fields: AbcMapping[str, str]) -> int:
    """The characters a result's title and fields take in a response, as the size cap and
    the fetch quota count them: field names as well as values, both carried to the caller."""
    return len(title) + sum(len(name) + len(value) for name, value in fields.items())


@attrs.frozen
class _Draft:
    """A result after allowlist and masking, before the size cap."""

    ranked: RankedCandidate
    source: str
    title: str
    content: str
    fragment: str
    fields: dict[str, str]

    def fixed_chars(self) -> int:
        return carried_chars(self.title, self.fields)

    def chars(self) -> int:
        return self.fixed_chars() + len(self.fragment)

    def shortened(self, max_chars: int) -> _Draft:
        if len(self.fragment) <= max_chars:
            return self
        terms = self.ranked.candidate.matched_terms
        return attrs.evolve(self, fragment=make_fragment(self.content, terms, max_chars))

    def item(self, document_ref: str | None = None) -> ResultItem:
        return ResultItem(
            result_id=self.ranked.result_id,
            source=self.source,
            title=self.title,
            fragment=self.fragment,
            score=round(self.ranked.final, 6),
            fields=self.fields,
            document_ref=document_ref,
        )


def _draft(ranked: RankedCandidate, fragment_chars: int, source_name: str) -> _Draft:
    candidate = ranked.candidate
    mapping = candidate.mapping
    texts = masked_values(allowlisted_values(candidate), mapping)
    content = content_text(texts, mapping)
    # Title and content are shown as title and fragment; repeating them as fields would return
    # the whole content and defeat the bounded fragment.
    shown = {mapping.title_field, *mapping.content_fields}
    return _Draft(
        ranked=ranked,
        source=source_name,
        title=texts.get(mapping.title_field, ""),
        content=content,
        fragment=(
            ranked.fragment
            if ranked.fragment is not None
            else make_fragment(content, candidate.matched_terms, fragment_chars)
        ),
        fields={k: v for k, v in texts.items() if k not in shown},
    )


def _fits(drafts: Sequence[_Draft], fragment_chars: int, cap: int) -> bool:
    total = sum(d.fixed_chars() + min(len(d.fragment), fragment_chars) for d in drafts)
    return total <= cap


def _size_cap(drafts: list[_Draft], cap: int) -> tuple[list[_Draft], ResponseWarning | None]:
    """Shorten fragments (not below the floor), then drop trailing results, to fit ``cap``;
    a result too large to fit alone is dropped first."""
    if not drafts or sum(d.chars() for d in drafts) <= cap:
        return drafts, None
    longest = max(len(d.fragment) for d in drafts)
    floor = min(FRAGMENT_FLOOR_CHARS, longest)
    # A result that cannot fit even alone is left out wherever it ranks: kept in the prefix
    # below, one oversized record ranked first would empty the whole response.
    fitting = [d for d in drafts if _fits([d], floor, cap)]
    kept = len(fitting)
    while kept > 0 and not _fits(fitting[:kept], floor, cap):
        kept -= 1
    survivors = fitting[:kept]
    # The longest fragment budget that still fits: binary search, since fitting is monotone.
    low, high = floor, longest
    while low < high:
        middle = (low + high + 1) // 2
        if _fits(survivors, middle, cap):
            low = middle
        else:
            high = middle - 1
    capped = [d.shortened(low) for d in survivors]
    shortened = sum(
        1
        for before, after in zip(survivors, capped, strict=True)
        if before.fragment != after.fragment
    )
    dropped = len(drafts) - kept
    warning = ResponseWarning(
        WarningCode.ESRA_RESPONSE_TRUNCATED,
        f"The response size cap was reached: {dropped} result(s) dropped and "
        f"{shortened} fragment(s) shortened.",
    )
    return capped, warning


def sanitize_text(text: str, max_chars: int) -> str:
    """Return ``text`` with control characters removed, whitespace collapsed, capped."""
    return collapsed(str(text))[:max_chars]


def sanitize_warnings(warnings: Sequence[ResponseWarning]) -> tuple[ResponseWarning, ...]:
    """Keep classified warnings only, with control characters removed and messages capped.

    Exact duplicates are reported once.
    """
    clean: dict[tuple[WarningCode, str], ResponseWarning] = {}
    for warning in warnings:
        # Typed as classified, but checked at run time: this is the last gate before a caller.
        code: object = warning.code
        if not isinstance(code, WarningCode):
            continue
        message = sanitize_text(warning.message, MAX_WARNING_CHARS)
        clean.setdefault((code, message), ResponseWarning(code, message))
    return tuple(clean.values())


def _document_refs(
    capped: Sequence[_Draft], scope: EffectiveScope, refs: DocumentRefMinter | None
) -> Sequence[str | None]:
    """Each result's ``document_ref``, minted together: they share a caller and exposure."""
    if refs is None or not scope.exposure.fetch_enabled:
        return [None] * len(capped)
    candidates = (d.ranked.candidate for d in capped)
    locators = [DocumentLocator(c.source_id, c.mapping.id, c.key) for c in candidates]
    return refs.mint_all(scope.exposure.id, locators)


def respond(
    ranked: Sequence[RankedCandidate],
    *,
    scope: EffectiveScope,
    warnings: Sequence[ResponseWarning],
    correlation_id: str,
    source_names: AbcMapping[str, str],
    refs: DocumentRefMinter | None = None,
) -> RetrievalResponse:
    """Assemble the response: top-K, allowlist, masking, size cap, then sanitization.

    ``status`` is ``DEGRADED`` exactly when at least one warning survives sanitization.
    When the exposure enables fetch and ``refs`` is given, each result carries a
    ``document_ref`` naming its record, minted for this caller; otherwise none does.
    """
    exposure = scope.exposure
    top = ranked[: exposure.top_k]
    drafts = [
        _draft(
            r,
            exposure.fragment_chars,
            source_names.get(r.candidate.source_id, r.candidate.source_id),
        )
        for r in top
    ]
    capped, truncation = _size_cap(drafts, exposure.size_cap_chars)
    all_warnings = [*warnings, *([truncation] if truncation else [])]
    final_warnings = sanitize_warnings(all_warnings)
    return RetrievalResponse(
        status=ResponseStatus.DEGRADED if final_warnings else ResponseStatus.COMPLETE,
        results=tuple(
            d.item(ref) for d, ref in zip(capped, _document_refs(capped, scope, refs), strict=True)
        ),
        warnings=final_warnings,
        correlation_id=correlation_id,
    )
