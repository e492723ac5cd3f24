"""Hostile input to field projection (layer 4) and record-level security (layer 5).

Each test reproduces a hole these layers had; the comment heading each section says which
sentence of the specification it broke.
"""

from __future__ import annotations

import json

import attrs
import pytest

from esra.core._masking import MASK, masked_record, masked_values
from esra.core._prompts.builders import build_planning_prompt
from esra.core._query import PlannedFilter, Strategy
from esra.core.config import Mapping, MaskingKind, MaskingRule, Operator
from esra.core.ports import ProviderCapabilities, TextIndexKind
from tests.core._validation_fixtures import RICH_FIELDS, keyword, make_world, with_record_filter
from tests.core.factories import make_field, make_mapping, make_source

_CAPS = ProviderCapabilities(
    strategies=frozenset(Strategy),
    operators=frozenset(Operator),
    text_index=TextIndexKind.SQLITE_FTS5,
)

# --------------------------------------------------------------------------------------------
# 1. A field outside the returnable allowlist.
#
# Spec 003, "What Is Never Sent to a Model": "restricted fields, or any field outside the
# returnable allowlist". The planning prompt offered every non-restricted field, the
# non-returnable ones included, and the validator accepted a planned filter on a filterable
# but non-returnable field: a caller steering the planner through its prompt ("only grade B")
# learned the hidden field's values from which rows came back — the oracle the caller-filter
# path already refuses for exactly such a field.
# --------------------------------------------------------------------------------------------

_GRADE = make_field("grade", filterable=True, returnable=False, operators=(Operator.EQ,))


def _with_grade() -> Mapping:
    return make_mapping("m-1", source_id="s-1", fields=(*RICH_FIELDS, _GRADE))


def test_a_non_returnable_field_is_not_offered_to_the_planner() -> None:
    mapping = _with_grade()
    prompt = build_planning_prompt(
        "grade B projects",
        make_source("s-1"),
        [mapping],
        _CAPS,
        max_queries=2,
        model_profile="default",
    )
    offered = {
        field["fieldName"]
        for item in prompt.reference
        for field in json.loads(item.content).get("fields", [])
    }
    assert offered == {f.name for f in mapping.returnable_fields()}
    assert {"grade", "internal_notes", "dept", "salary"}.isdisjoint(offered)


def test_a_planned_filter_on_a_filterable_but_non_returnable_field_is_rejected() -> None:
    mapping = _with_grade()
    outcome = make_world(m1=mapping).validate(
        [keyword(filters=(PlannedFilter("grade", "eq", "B"),))]
    )
    assert outcome.queries == ()
    assert [r.reason.value for r in outcome.rejections] == ["FIELD_NOT_RETURNABLE"]
    # The response reads as for any field the caller may not see.
    assert [w.message for w in outcome.warnings] == [
        "1 planned query for source 'Source s-1' rejected: UNKNOWN_FIELD."
    ]


# --------------------------------------------------------------------------------------------
# 2. Two masking rules for one field.
#
# Spec 003, "Output Safety": masking is one of the output controls, and a masked value is the
# only form of it that may leave. Nothing refuses a mapping with two rules for one field (a
# ``full`` rule and a ``last4`` one, say, added by two edits), and the rule listed last won:
# ``full`` followed by ``last4`` showed the last four characters the first rule hid. When
# rules disagree the field must be masked whole, whichever order they come in.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kinds",
    [
        (MaskingKind.FULL, MaskingKind.LAST4),
        (MaskingKind.LAST4, MaskingKind.FULL),
        (MaskingKind.FULL, MaskingKind.EMAIL),
        (MaskingKind.EMAIL, MaskingKind.LAST4),
    ],
)
def test_a_field_with_conflicting_masking_rules_is_masked_whole(
    kinds: tuple[MaskingKind, MaskingKind],
) -> None:
    mapping = make_mapping(
        "m-1",
        source_id="s-1",
        fields=(make_field("title"), make_field("body"), make_field("contact")),
        masking=tuple(MaskingRule("contact", kind) for kind in kinds),
    )
    value = "jane.doe@example.com"
    assert masked_values({"contact": value}, mapping) == {"contact": MASK}
    parted = attrs.evolve(mapping, content_fields=("body", "contact"), part_order_column="n")
    assert masked_record([{"contact": value}], parted) == [{"contact": MASK}]


def test_repeating_one_masking_rule_changes_nothing() -> None:
    mapping = make_mapping(
        "m-1",
        source_id="s-1",
        fields=(make_field("title"), make_field("body"), make_field("card")),
        masking=(MaskingRule("card", MaskingKind.LAST4), MaskingRule("card", MaskingKind.LAST4)),
    )
    assert masked_values({"card": "4111111111111111"}, mapping) == {"card": MASK + "1111"}


# --------------------------------------------------------------------------------------------
# 3. An integer claim too long to write as text.
#
# Spec 003, "Record-Level Security": "A missing claim is fail-closed. The query is not
# executed and the source is dropped with a warning." An integer claim bound to a text field
# is sent as its digits, but Python refuses to write an integer of more than 4,300 digits:
# the ``ValueError`` escaped the validator and failed the whole invocation (every other
# source with it) instead of dropping the one source whose claim is unusable.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "claim",
    [10**5000, -(10**5000), 2**63, -(2**63) - 1],
    ids=["5001-digits", "minus-5001-digits", "2**63", "below-int64"],
)
def test_an_integer_claim_outside_64_bits_drops_the_source_of_a_text_record_filter(
    claim: int,
) -> None:
    world = make_world(m1=with_record_filter(), claims={"dept": claim})
    outcome = world.validate([keyword(), keyword("s-2")])
    assert outcome.dropped_sources == ("s-1",)
    assert [q.source_id for q in outcome.queries] == ["s-2"]
    assert [w.code.value for w in outcome.warnings] == ["ESRA_SOURCE_DROPPED_MISSING_CLAIM"]


def test_an_integer_claim_within_64_bits_still_binds_to_a_text_record_filter() -> None:
    world = make_world(m1=with_record_filter(), claims={"dept": 2**63 - 1})
    (query, _) = world.validate([keyword(), keyword("s-2")]).queries
    assert [f.values for f in query.record_filters] == [(str(2**63 - 1),)]
