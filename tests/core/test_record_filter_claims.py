"""A mapping's ``record_filters`` bind claims by the same check as record-filter templates.

Spec 003 (Record-Level Security): "A missing claim is fail-closed. The query is not executed
and the source is dropped with a warning." A claim that is empty, a set holding an empty
value, or text holding control or zero-width characters (which collations ignore, so
``'\\x00emea'`` can match ``'emea'``) is as unusable as a missing one. The template path always
refused these; ``record_filters`` bound them. Every path that binds record filters is checked
here: the validator (search), the retriever end to end, the fetch lookup and the listing of
filterable fields.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from esra.core._config.record_filter_template import parse_record_filter_template
from esra.core._fetch.service import DocumentFetcher
from esra.core._pipeline._validation_rules import resolve_record_filters
from esra.core._pipeline.caller_filters import caller_filter_fields
from esra.core._pipeline.validation import validate_lookup
from esra.core._record_predicate import (
    MAX_CLAIM_VALUES,
    MissingClaimError,
    PredicateComparison,
    bind_template,
)
from esra.core._response import ResponseStatus
from esra.core._retriever import Retriever
from esra.core.codes import WarningCode
from esra.core.config import (
    BindingMode,
    ConfigSnapshot,
    FieldType,
    Operator,
    RecordFilter,
    SourceBinding,
)
from esra.core.exceptions import DocumentNotFoundError
from esra.core.fetch import Keyring
from esra.core.testing import (
    FakeClock,
    FakeLanguageModel,
    InMemoryAuditSink,
    InMemoryConfigRepository,
    InMemoryQuotaStore,
    InMemorySearchProvider,
)
from tests.core._validation_fixtures import ALL_CAPS, keyword, make_world, rich_mapping
from tests.core.factories import (
    TENANT,
    make_capability,
    make_context,
    make_exposure,
    make_field,
    make_mapping,
    make_scoped,
    make_snapshot,
    make_source,
)

# Claims a text record filter must refuse, each dropping the source. Every one is refused by
# the template path already; the point is that both paths refuse the same claims.
UNUSABLE_TEXT_CLAIMS: dict[str, object] = {
    "empty-string": "",
    "empty-tuple": (),
    "tuple-of-empty-string": ("",),
    "tuple-holding-an-empty-string": ("sales", ""),
    "nul": "\x00sales",
    "zero-width-space": "sales\u200b",
    "bidi-override": "sales\u202e",
    "line-separator": "sales\u2028",
    "tuple-holding-zero-width": ("ops", "sales\u200b"),
    "too-many-values": tuple(f"d{i}" for i in range(MAX_CLAIM_VALUES + 1)),
    "boolean": True,
}
UNUSABLE = pytest.mark.parametrize(
    "claim", list(UNUSABLE_TEXT_CLAIMS.values()), ids=list(UNUSABLE_TEXT_CLAIMS)
)


def _dept_filtered(**overrides: Any) -> Any:
    return rich_mapping(record_filters=(RecordFilter(field="dept", claim="dept"),), **overrides)


# --- the validator (search) ----------------------------------------------------------------


@UNUSABLE
def test_record_filter_with_an_unusable_claim_drops_the_source(claim: Any) -> None:
    """The source is dropped with the missing-claim warning, never searched with the value."""
    outcome = make_world(m1=_dept_filtered(), claims={"dept": claim}).validate(
        [keyword(), keyword("s-2")]
    )
    assert [q.source_id for q in outcome.queries] == ["s-2"]
    assert outcome.dropped_sources == ("s-1",)
    assert [w.code for w in outcome.warnings] == [WarningCode.ESRA_SOURCE_DROPPED_MISSING_CLAIM]


@UNUSABLE
def test_template_refuses_the_same_claims(claim: Any) -> None:
    """Control: the template path refuses every one of them too."""
    mapping = rich_mapping(record_filter_template="dept IN {claim:dept}")
    template = parse_record_filter_template("dept IN {claim:dept}", mapping)
    with pytest.raises(MissingClaimError):
        bind_template(template, mapping, {"dept": claim})


def test_integer_claim_binds_to_a_text_filter_as_its_digits_as_in_templates() -> None:
    """The shared coercion: a text field takes an integer claim as its decimal digits."""
    (query,) = make_world(m1=_dept_filtered(), claims={"dept": 7}).validate([keyword()]).queries
    assert query.record_filters[0].values == ("7",)


_CLAIMS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.text(max_size=12),
    st.sampled_from(["", "2025-01-31", "12", "-3.5", "x\u200b", "\x00", "emea"]),
    st.tuples(),
    st.lists(st.text(max_size=6), max_size=4).map(tuple),
)
# rich_mapping's fields by type: status (text), year (integer), amount (number), active
# (boolean), published_on (date).
_FIELD_OF_TYPE = {
    FieldType.TEXT: "status",
    FieldType.INTEGER: "year",
    FieldType.NUMBER: "amount",
    FieldType.BOOLEAN: "active",
    FieldType.DATE: "published_on",
}


@settings(deadline=None, max_examples=300)
@given(claim=_CLAIMS, field_type=st.sampled_from(list(_FIELD_OF_TYPE)))
def test_record_filters_and_templates_accept_and_bind_exactly_the_same_claims(
    claim: Any, field_type: FieldType
) -> None:
    """``field = <claim>`` as a record filter and ``field IN {claim:c}`` as a template: one
    refuses a claim exactly when the other does, and both bind the same values."""
    field = _FIELD_OF_TYPE[field_type]
    claims: dict[str, Any] = {"c": claim}
    record_filtered = rich_mapping(record_filters=(RecordFilter(field=field, claim="c"),))
    resolved = resolve_record_filters(record_filtered, claims)
    text = f"{field} IN {{claim:c}}"
    templated = rich_mapping(record_filter_template=text)
    try:
        predicate = bind_template(parse_record_filter_template(text, templated), templated, claims)
    except MissingClaimError:
        assert resolved is None
        return
    assert resolved is not None
    assert isinstance(predicate, PredicateComparison)
    assert resolved[0].values == predicate.values


# --- end to end: the retriever -------------------------------------------------------------

_ROWS = {
    "m-s-1": [
        # No department assigned yet: an empty string, as many systems store it.
        {"col_id": 1, "col_title": "Salary review", "col_body": "salary review", "col_dept": ""},
        {"col_id": 2, "col_title": "Sales salary", "col_body": "salary bands", "col_dept": "sales"},
    ]
}


def _dept_mapping(**overrides: Any) -> Any:
    fields = (make_field("title"), make_field("body"), make_field("dept", restricted=True))
    return make_mapping("m-s-1", source_id="s-1", fields=fields, **overrides)


@pytest.mark.parametrize("claim", ["", ("",), "\x00sales", "sales\u200b"])
async def test_retriever_serves_no_row_to_a_caller_with_an_unusable_claim(claim: Any) -> None:
    """Before the fix an empty claim matched the rows whose department is empty."""
    mapping = _dept_mapping(record_filters=(RecordFilter(field="dept", claim="dept"),))
    retriever = Retriever(
        config=InMemoryConfigRepository([make_snapshot([make_source("s-1")], mappings=[mapping])]),
        providers={"s-1": InMemorySearchProvider(_ROWS)},
        model=FakeLanguageModel(),
        audit=InMemoryAuditSink(),
        clock=FakeClock(),
    )
    response = await retriever.retrieve(make_context(claims={"dept": claim}), "salary review")
    assert response.results == ()
    assert response.status is ResponseStatus.DEGRADED
    assert WarningCode.ESRA_SOURCE_DROPPED_MISSING_CLAIM in {w.code for w in response.warnings}


# --- the fetch lookup ----------------------------------------------------------------------


@UNUSABLE
def test_lookup_with_an_unusable_claim_finds_nothing(claim: Any) -> None:
    """``validate_lookup`` answers ``None`` — the fetch's "not found" — as for a missing claim."""
    scoped = make_scoped(make_source("s-1"), mappings=[_dept_filtered()])
    assert (
        validate_lookup(
            make_context(claims={"dept": "sales"}), scoped, mapping_id="m-1", record_key="1"
        )
        is not None
    )
    ctx = make_context(claims={"dept": claim})
    assert validate_lookup(ctx, scoped, mapping_id="m-1", record_key="1") is None


def _fetch_snapshot(mapping: Any) -> ConfigSnapshot:
    capability = make_capability([SourceBinding("s-1", BindingMode.MANDATORY)])
    return make_snapshot(
        [make_source("s-1")],
        capability=capability,
        mappings=[mapping],
        exposure=make_exposure(fetch_enabled=True, size_cap_chars=5_000),
    )


@pytest.mark.parametrize("claim", ["", ("",)], ids=["empty-string", "tuple-of-empty-string"])
async def test_fetch_with_an_empty_claim_is_not_found(claim: Any) -> None:
    """A record with an empty department opens for nobody once the source is record-filtered.

    The reference is found while the mapping has no record filter; the filter is added
    before the fetch, which re-binds it to the caller's claim. Before the fix the empty claim
    bound as ``dept = ''`` and opened the record.
    """
    open_mapping = _dept_mapping()
    guarded = _dept_mapping(record_filters=(RecordFilter(field="dept", claim="dept"),))
    clock, audit, keyring = FakeClock(), InMemoryAuditSink(), Keyring.generate("k1")
    config = InMemoryConfigRepository([_fetch_snapshot(open_mapping)])
    providers = {"s-1": InMemorySearchProvider(_ROWS)}
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
        hourly_chars=100_000,
        clock=clock,
        executor=retriever.executor,
        tenant_id=TENANT,
    )
    caller = make_context(claims={"dept": claim})
    found = await retriever.retrieve(caller, "salary review")
    ref = next(r.document_ref for r in found.results if r.title == "Salary review")
    assert ref is not None
    assert (await fetcher.fetch(caller, ref)).text
    config.put(_fetch_snapshot(guarded))
    with pytest.raises(DocumentNotFoundError):
        await fetcher.fetch(caller, ref)


# --- the filterable-field listing ----------------------------------------------------------


@UNUSABLE
def test_a_source_whose_claim_is_unusable_lists_no_filterable_field(claim: Any) -> None:
    """Its fields are not offered: the validator would drop the source anyway."""
    team = make_field("team", filterable=True, operators=(Operator.EQ,))
    secured = make_scoped(
        make_source("s-3"),
        mappings=[
            make_mapping(
                "m-s-3",
                source_id="s-3",
                fields=(make_field("title"), make_field("body"), team),
                record_filters=(RecordFilter(field="team", claim="team"),),
            )
        ],
    )
    caps = {"s-3": ALL_CAPS}
    listed = caller_filter_fields(make_context(claims={"team": "blue"}), [secured], caps)
    assert [f.name for f in listed] == ["team"]
    assert caller_filter_fields(make_context(claims={"team": claim}), [secured], caps) == ()
