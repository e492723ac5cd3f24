"""Shared scaffolding of the engines' injection tests: issued queries, slots, checks.

Queries are issued with ``_issue`` on purpose, bypassing the validator (which would reject
most payloads for their ``;``/``--``): the builder and the provider must be safe even for a
future code path that forgets the validator. Each engine's ``test_injection`` keeps its own
query shape (which terms are also excluded) and its own extra checks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from esra.core._config.mapping import FieldType, Operator
from esra.core._pipeline.values import ValidatedQuery, _issue
from esra.core._query import ProjectedField, ResolvedFilter, ResultRow, Strategy
from esra.core.exceptions import ProviderError
from esra.core.ports import SearchProvider
from esra.core.testing.contract import CONTRACT_MAPPING, CONTRACT_ROWS
from esra.sql import StatementBuilder

__all__ = [
    "BY_KEY",
    "IN_SCOPE",
    "SLOTS",
    "QueryMaker",
    "assert_every_slot_compiles_to_the_benign_text",
    "assert_value_rows_match_exactly",
    "execute_payloads",
    "issue",
    "payload_query",
    "variant_query",
]

# The five places a payload can stand in a query.
SLOTS = ("required", "optional", "phrase", "value", "claim")

# The contract rows the benign filters (category energy, org acme) admit.
IN_SCOPE = frozenset(
    str(r["art_key"])
    for r in CONTRACT_ROWS
    if r["art_category"] == "energy" and r["art_org"] == "acme"
)
BY_KEY = {str(r["art_key"]): r for r in CONTRACT_ROWS}


# Builds a query with a payload in the named slots (benign values elsewhere).
QueryMaker = Callable[..., ValidatedQuery]


def issue(**overrides: Any) -> ValidatedQuery:
    """A query issued directly over the contract mapping. Benign values by default."""
    values: dict[str, Any] = {
        "query_id": "src-contract#1",
        "source_id": CONTRACT_MAPPING.source_id,
        "mapping": CONTRACT_MAPPING,
        "strategy": Strategy.KEYWORD,
        "required_terms": (),
        "optional_terms": (),
        "excluded_terms": (),
        "phrases": (),
        "filters": (),
        "record_filters": (ResolvedFilter("art_org", FieldType.TEXT, Operator.EQ, ("acme",)),),
        "projection": (ProjectedField("title", "art_title"), ProjectedField("body", "Art Body")),
        "freshness": ProjectedField("published", "art_published"),
        "row_limit": 50,
    }
    values.update(overrides)
    return _issue(**values)


def payload_query(
    *,
    required: str = "solar",
    optional: str = "inverter",
    phrase: str = "solar panel",
    value: str = "energy",
    claim: str = "acme",
    excluded: tuple[str, ...] = (),
) -> ValidatedQuery:
    """A keyword query with something in every slot: the compile-time injection probe."""
    return issue(
        required_terms=(required,),
        optional_terms=(optional,),
        excluded_terms=excluded,
        phrases=(phrase,),
        filters=(ResolvedFilter("art_category", FieldType.TEXT, Operator.EQ, (value,)),),
        record_filters=(ResolvedFilter("art_org", FieldType.TEXT, Operator.EQ, (claim,)),),
    )


def variant_query(
    *,
    optional: str | None = None,
    value: str = "energy",
    claim: str = "acme",
    exclude_optional: bool = False,
) -> ValidatedQuery:
    """A keyword query of optional terms only (so a payload term alone decides the match).

    With ``exclude_optional`` a payload term is excluded as well (``!!`` sees it too).
    """
    return issue(
        optional_terms=("solar" if optional is None else optional, "inverter"),
        excluded_terms=(optional,) if exclude_optional and optional is not None else (),
        filters=(ResolvedFilter("art_category", FieldType.TEXT, Operator.EQ, (value,)),),
        record_filters=(ResolvedFilter("art_org", FieldType.TEXT, Operator.EQ, (claim,)),),
        projection=(ProjectedField("title", "art_title"),),
        freshness=None,
    )


def assert_every_slot_compiles_to_the_benign_text(
    builder: StatementBuilder,
    query: QueryMaker,
    payloads: Sequence[str],
    *,
    slots: Sequence[str] = SLOTS,
    also: Callable[[str], None] | None = None,
) -> bytes:
    """Each payload in all ``slots`` at once, then each slot alone over a spread of the list
    (to rule out slots masking each other), leaves the uncached command text byte-identical
    to the benign query's. ``also`` checks each all-slots text further. Returns the benign
    text."""
    benign = builder.compile(query()).sql.encode()
    for payload in payloads:
        # All slots at once: the text may depend on none of them.
        together = builder.compile(query(**dict.fromkeys(slots, payload))).sql
        assert together.encode() == benign, payload
        if also is not None:
            also(together)
    for payload in payloads[::100]:
        for slot in slots:
            alone = builder.compile(query(**{slot: payload}))
            assert alone.sql.encode() == benign, (slot, payload)
    return benign


def assert_value_rows_match_exactly(rows: Iterable[ResultRow], payload: str) -> None:
    """A row may come back for a payload category filter and org claim only if its stored
    values equal the payload exactly."""
    for row in rows:
        source = BY_KEY[row.key]
        assert source["art_category"] == payload == source["art_org"], payload


async def execute_payloads(
    provider: SearchProvider, payloads: Iterable[str], *, exclude_optional: bool = False
) -> list[tuple[str, str]]:
    """Run every payload as a term and as filter/claim values, one after the other.

    Term payloads run with benign filters: every row returned must be in scope. Value
    payloads run as the category filter and the org claim (see
    ``assert_value_rows_match_exactly``). Returns the ``(code, payload)`` of every failure.
    """
    failures: list[tuple[str, str]] = []
    for payload in payloads:
        as_term = variant_query(optional=payload, exclude_optional=exclude_optional)
        as_value = variant_query(value=payload, claim=payload)
        try:
            term_rows = await provider.execute(as_term, timeout_s=10.0)
            value_rows = await provider.execute(as_value, timeout_s=10.0)
        except ProviderError as exc:
            failures.append((exc.code.value, payload))
            continue
        assert {r.key for r in term_rows} <= IN_SCOPE, payload
        assert_value_rows_match_exactly(value_rows, payload)
    return failures
