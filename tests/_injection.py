"""Shared scaffolding of the engines' injection tests: issued queries, slots, checks.

Queries are issued with ``_issue`` on purpose, bypassing the validator (which would reject
most payloads for their ``;``/``--``): the builder and the provider must be safe even for a
future code path that forgets the validator. Each engine's ``test_injection`` keeps its own
query shape (which terms are also excluded) and its own extra checks.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
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

# One compilation to check: the slots filled with the payload, and the payload.
_Case = tuple[tuple[str, ...], str]

# Each compile worker spends about a second importing SQLAlchemy and ESRA before its first
# compilation; beyond four the ~20,000 compilations gain too little to pay for more.
_MAX_WORKERS = 4


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
    builder: Callable[[], StatementBuilder],
    query: QueryMaker,
    payloads: Sequence[str],
    *,
    slots: Sequence[str] = SLOTS,
) -> str:
    """Each payload in all ``slots`` at once, then each slot alone over a spread of the list
    (to rule out slots masking each other), leaves the uncached command text byte-identical
    to the benign query's. Returns the benign text.

    ``builder`` makes an uncached ``StatementBuilder``; it and ``query`` must be module-level
    functions: the ~20,000 compilations are shared among this machine's cores by worker
    processes that import them by name (each compilation is independent, and one of a
    PostgreSQL search takes ~15 ms of SQLAlchemy, so one core alone took five minutes).
    """
    benign = builder().compile(query()).sql
    cases: list[_Case] = [(tuple(slots), payload) for payload in payloads]
    cases += [((slot,), payload) for payload in payloads[::100] for slot in slots]
    mismatches = _compile_in_parallel(builder, query, benign, cases)
    assert mismatches == [], mismatches[:10]
    return benign


def _compile_in_parallel(
    builder: Callable[[], StatementBuilder], query: QueryMaker, benign: str, cases: list[_Case]
) -> list[_Case]:
    """The cases whose text differs from ``benign``, compiled on every core this process may
    use. Worker processes are spawned (not forked): the test process may hold threads and
    locks a fork would copy mid-use."""
    workers = min(len(os.sched_getaffinity(0)), _MAX_WORKERS)
    if workers == 1:
        return _mismatches(builder, query, benign, cases)
    # Several chunks per worker, so one slow chunk does not leave the other cores idle.
    size = max(1, len(cases) // (workers * 8))
    chunks = [cases[i : i + size] for i in range(0, len(cases), size)]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = [pool.submit(_mismatches, builder, query, benign, chunk) for chunk in chunks]
        return [case for future in futures for case in future.result()]


def _mismatches(
    builder: Callable[[], StatementBuilder], query: QueryMaker, benign: str, cases: list[_Case]
) -> list[_Case]:
    """The cases whose uncached command text is not byte-identical to ``benign``."""
    uncached = builder()
    expected = benign.encode()
    return [
        (slots, payload)
        for slots, payload in cases
        if uncached.compile(query(**dict.fromkeys(slots, payload))).sql.encode() != expected
    ]


def assert_value_rows_match_exactly(rows: Iterable[ResultRow], payload: str) -> None:
    """A row may come back for a payload category filter and org claim only if its stored
    values equal the payload exactly."""
    for row in rows:
        source = BY_KEY[row.key]
        assert source["art_category"] == payload == source["art_org"], payload


async def execute_payloads(
    provider: SearchProvider,
    payloads: Iterable[str],
    *,
    exclude_optional: bool = False,
    concurrency: int = 1,
) -> list[tuple[str, str]]:
    """Run every payload as a term and as filter/claim values, ``concurrency`` at a time.

    Term payloads run with benign filters: every row returned must be in scope. Value
    payloads run as the category filter and the org claim (see
    ``assert_value_rows_match_exactly``). Returns the ``(code, payload)`` of every failure.
    Running several at once lets a server on another core work while this process builds the
    next statement; the first failed assertion cancels the rest.
    """
    failures: list[tuple[str, str]] = []
    gate = asyncio.Semaphore(concurrency)

    async def run(payload: str) -> None:
        as_term = variant_query(optional=payload, exclude_optional=exclude_optional)
        as_value = variant_query(value=payload, claim=payload)
        async with gate:
            try:
                term_rows = await provider.execute(as_term, timeout_s=10.0)
                value_rows = await provider.execute(as_value, timeout_s=10.0)
            except ProviderError as exc:
                failures.append((exc.code.value, payload))
                return
        assert {r.key for r in term_rows} <= IN_SCOPE, payload
        assert_value_rows_match_exactly(value_rows, payload)

    async with asyncio.TaskGroup() as group:
        for payload in payloads:
            group.create_task(run(payload))
    return failures
