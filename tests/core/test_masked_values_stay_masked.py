"""A masked value leaves ESRA masked: not through filters, not part by part.

Found by a hostile review: a ``full``-masked salary that was also filterable came back
exactly through about two dozen ``gt`` filters (which rows return is an oracle, the reason a
restricted field is never filtered on); and a record of ordered parts (the document store's
segments, any mapping with ``part_order_column``) was masked part by part, so ``last4``
showed four characters of every part and ``full`` one mask per part.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest

from esra.core._fetch.service import DocumentFetcher
from esra.core._masking import MASK
from esra.core._pipeline._validation_rules import Violation, resolve_filter
from esra.core._prompts.builders import build_planning_prompt
from esra.core._query import PlannedFilter, Strategy
from esra.core._retriever import Retriever
from esra.core.codes import RejectionReason
from esra.core.config import (
    BindingMode,
    CapabilityLimits,
    FieldType,
    MaskingKind,
    MaskingRule,
    Operator,
    SourceBinding,
)
from esra.core.exceptions import InvalidRequestError
from esra.core.fetch import Keyring
from esra.core.ports import ProviderCapabilities, TextIndexKind
from esra.core.testing import (
    FakeClock,
    FakeLanguageModel,
    InMemoryAuditSink,
    InMemoryConfigRepository,
    InMemoryQuotaStore,
    InMemorySearchProvider,
)
from tests.core.factories import (
    TENANT,
    make_capability,
    make_context,
    make_exposure,
    make_field,
    make_mapping,
    make_snapshot,
    make_source,
)

# --------------------------------------------------------------------------------------------
# 1. A masked field offered as a caller filter is an oracle for the value it masks.
# --------------------------------------------------------------------------------------------

SALARY_ROWS = {
    "m-s-1": [
        {"col_id": 1, "col_title": "Ana Lopez", "col_body": "staff record", "col_salary": 123_456},
    ]
}


def _salary_retriever() -> Retriever:
    salary = make_field(
        "salary",
        type=FieldType.INTEGER,
        searchable=False,
        filterable=True,
        operators=(Operator.EQ, Operator.LT, Operator.GT),
    )
    mapping = make_mapping(
        "m-s-1",
        source_id="s-1",
        fields=(make_field("title"), make_field("body"), salary),
        masking=(MaskingRule("salary", MaskingKind.FULL),),
    )
    snapshot = make_snapshot(
        [make_source("s-1")],
        capability=make_capability([SourceBinding("s-1", BindingMode.MANDATORY)]),
        mappings=[mapping],
    )
    return Retriever(
        config=InMemoryConfigRepository([snapshot]),
        providers={"s-1": InMemorySearchProvider(SALARY_ROWS)},
        model=FakeLanguageModel(),
        audit=InMemoryAuditSink(),
        clock=FakeClock(),
        tenant_id=TENANT,
    )


async def _found(retriever: Retriever, op: str, value: int) -> bool:
    response = await retriever.retrieve(
        make_context(),
        "staff record",
        filters=[PlannedFilter(field="salary", operator=op, value=value)],
    )
    return bool(response.results)


async def test_a_fully_masked_field_cannot_be_recovered_through_range_filters() -> None:
    """``salary`` is masked ``full``: every response shows ``****``. A caller may not learn it
    by binary search over ``gt`` filters (a restricted field is refused for this reason)."""
    retriever = _salary_retriever()
    plain = await retriever.retrieve(make_context(), "staff record")
    assert plain.results[0].fields["salary"] == MASK

    recovered: int | None = None
    try:
        low, high = 0, 10_000_000
        while low < high:  # smallest v with NOT (salary > v) == salary
            middle = (low + high) // 2
            if await _found(retriever, "gt", middle):
                low = middle + 1
            else:
                high = middle
        recovered = low
    except InvalidRequestError:
        recovered = None
    assert recovered != 123_456, "the masked salary was recovered exactly through filters"


def test_the_planner_may_not_filter_on_a_masked_field_and_is_not_offered_it() -> None:
    """The model's plan is held to the same rule as the caller's filters: refused as
    ``FIELD_RESTRICTED``, and the planning prompt says the field is not filterable."""
    salary = make_field("salary", type=FieldType.INTEGER, filterable=True, operators=(Operator.GT,))
    mapping = make_mapping(
        "m-s-1",
        fields=(make_field("title"), make_field("body"), salary),
        masking=(MaskingRule("salary", MaskingKind.FULL),),
    )
    caps = ProviderCapabilities(
        strategies=frozenset(Strategy),
        operators=frozenset(Operator),
        text_index=TextIndexKind.SQLITE_FTS5,
    )
    with pytest.raises(Violation) as refused:
        resolve_filter(mapping, PlannedFilter("salary", "gt", 1), caps, CapabilityLimits())
    assert refused.value.reason is RejectionReason.FIELD_RESTRICTED
    assert not mapping.may_filter_on(salary)
    assert mapping.may_filter_on(attrs.evolve(salary, name="grade"))

    prompt = build_planning_prompt(
        "salaries", make_source("s-1"), [mapping], caps, max_queries=2, model_profile="default"
    )
    (offered,) = [
        field
        for item in prompt.reference
        for field in json.loads(item.content).get("fields", [])
        if field["fieldName"] == "salary"
    ]
    assert (offered["isFilterable"], offered["allowedOperators"]) == (False, [])


# --------------------------------------------------------------------------------------------
# 2. A multi-part record's masked content is masked as the record's value.
# --------------------------------------------------------------------------------------------

PARTS = {1: "Account A-1111 ", 2: "transferred to B-2222 ", 3: "then to C-3333"}


def _parts_world(kind: MaskingKind) -> tuple[Retriever, DocumentFetcher]:
    rows = {
        "m-s-1": [
            {"col_id": "doc-1", "col_title": "Ledger", "col_body": PARTS[n], "col_n": n}
            for n in (3, 1, 2)
        ]
    }
    mapping = make_mapping(
        "m-s-1",
        source_id="s-1",
        part_order_column="col_n",
        masking=(MaskingRule("body", kind),),
    )
    snapshot = make_snapshot(
        [make_source("s-1")],
        capability=make_capability([SourceBinding("s-1", BindingMode.MANDATORY)]),
        mappings=[mapping],
        exposure=make_exposure(fetch_enabled=True, size_cap_chars=5_000),
    )
    clock = FakeClock()
    config = InMemoryConfigRepository([snapshot])
    audit = InMemoryAuditSink()
    keyring = Keyring.generate("k1")
    providers = {"s-1": InMemorySearchProvider(rows)}
    retriever = Retriever(
        config=config,
        providers=providers,
        model=FakeLanguageModel(),
        audit=audit,
        clock=clock,
        keyring=keyring,
        tenant_id=TENANT,
    )
    fetcher = DocumentFetcher(
        config=config,
        providers=providers,
        audit=audit,
        keyring=keyring,
        quota=InMemoryQuotaStore(clock),
        clock=clock,
        executor=retriever.executor,
        tenant_id=TENANT,
    )
    return retriever, fetcher


async def _fetch_ledger(kind: MaskingKind) -> Any:
    retriever, fetcher = _parts_world(kind)
    response = await retriever.retrieve(make_context(), "Ledger")
    (item,) = response.results
    assert item.document_ref is not None
    return await fetcher.fetch(make_context(), item.document_ref)


async def test_last4_on_a_multi_part_record_keeps_only_the_records_last_four() -> None:
    """The record's text is its parts joined; ``last4`` keeps that value's last four
    characters, not four characters of every part."""
    document = await _fetch_ledger(MaskingKind.LAST4)
    whole = "".join(PARTS[n] for n in (1, 2, 3))
    assert document.text == MASK + whole[-4:]


async def test_full_mask_on_a_multi_part_record_has_a_fixed_width() -> None:
    """``full`` is fixed width "so the mask does not leak how long the value was"; masked
    part by part, the fetched text and ``total_chars`` count the record's parts."""
    document = await _fetch_ledger(MaskingKind.FULL)
    assert (document.text, document.total_chars) == (MASK, len(MASK))


async def test_last4_search_result_of_a_multi_part_record_shows_no_middle_part_tail() -> None:
    """A search finds one part; its ``last4`` fragment must not be the tail of that part
    (the caller picks the part with its words, and so reads every part's tail in turn)."""
    retriever, _ = _parts_world(MaskingKind.LAST4)
    response = await retriever.retrieve(make_context(), "transferred")
    (item,) = response.results
    assert "222" not in item.fragment, item.fragment
