"""An explanation shows a result's record key only where a caller would see it unmasked.

A record key is source-internal data (spec 000, Document Fetch), and field projection and
masking hold in every diagnostic (spec 003): when the key column is masked, restricted, not
returnable, or behind no field at all, the explanation's ``ranking`` carries a stand-in keyed
with a secret of that explanation alone — distinct per record, so results stay told apart,
and not a plain hash, which a low-entropy key such as an SSN gives back by enumeration.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable

import pytest

from esra.core._config.mapping import FieldSpec, Mapping, MaskingKind, MaskingRule
from esra.core._explain import WITHHELD_KEY_PREFIX, Explanation
from esra.core._retriever import Retriever
from esra.core.testing import (
    FakeClock,
    FakeLanguageModel,
    InMemoryAuditSink,
    InMemoryConfigRepository,
    InMemorySearchProvider,
)
from tests.core.factories import make_context, make_field, make_mapping, make_snapshot, make_source

SSNS = ("078-05-1120", "219-09-9999", "457-55-5462")
ROWS = {
    "m-s-1": [
        {"col_id": ssn, "col_title": f"Leave claim {n}", "col_body": "parental leave request"}
        for n, ssn in enumerate(SSNS)
    ]
}
TEXT_FIELDS = (make_field("title"), make_field("body"))


def _ssn(*, returnable: bool = True, restricted: bool = False) -> FieldSpec:
    # The key column, held by a business field; not searchable, so no plan searches an SSN.
    return make_field(
        "ssn", column="col_id", searchable=False, returnable=returnable, restricted=restricted
    )


def _mapping(fields: Iterable[FieldSpec], masking: tuple[MaskingRule, ...] = ()) -> Mapping:
    return make_mapping("m-s-1", fields=(*TEXT_FIELDS, *fields), masking=masking)


async def _explain(mapping: Mapping) -> Explanation:
    snapshot = make_snapshot([make_source("s-1")], mappings=[mapping])
    retriever = Retriever(
        config=InMemoryConfigRepository([snapshot]),
        providers={"s-1": InMemorySearchProvider(ROWS)},
        model=FakeLanguageModel(),
        audit=InMemoryAuditSink(),
        clock=FakeClock(),
    )
    explanation = await retriever.explain(make_context(), "parental leave", explained_by="op-1")
    assert explanation.status == "complete"
    assert len(explanation.ranking) == len(SSNS)
    return explanation


def _unkeyed_digests(value: str) -> set[str]:
    # What an enumerating reader would compute for a guessed key: plain hashes, whole or cut.
    digests = {hashlib.new(name, value.encode()).hexdigest() for name in ("md5", "sha1", "sha256")}
    digests.add(hmac.new(b"", value.encode(), "sha256").hexdigest())
    return digests


HIDING = {
    "masked": _mapping([_ssn()], masking=(MaskingRule("ssn", MaskingKind.LAST4),)),
    "masked in full": _mapping([_ssn()], masking=(MaskingRule("ssn", MaskingKind.FULL),)),
    "restricted": _mapping([_ssn(restricted=True)]),
    "not returnable": _mapping([_ssn(returnable=False)]),
    "behind no field": _mapping([]),
    # One field showing the column does not undo another's masking of the same column.
    "masked under another name": _mapping(
        [_ssn(), make_field("tax_id", column="col_id", searchable=False)],
        masking=(MaskingRule("tax_id", MaskingKind.LAST4),),
    ),
}


@pytest.mark.parametrize("mapping", HIDING.values(), ids=HIDING.keys())
async def test_a_key_column_a_caller_would_not_see_is_withheld(mapping: Mapping) -> None:
    explanation = await _explain(mapping)

    keys = [r.key for r in explanation.ranking]
    assert all(r.key_withheld for r in explanation.ranking)
    # The prefix and a digest, nothing else: no masked tail ("****1120") rides along.
    assert all(re.fullmatch(rf"{WITHHELD_KEY_PREFIX}[0-9a-f]{{16}}", key) for key in keys)
    # Still tells the results apart.
    assert len(set(keys)) == len(SSNS)
    rendered = repr(explanation)
    for ssn in SSNS:
        # Neither the key anywhere, nor a hash of it anyone could recompute.
        assert ssn not in rendered
        for digest in _unkeyed_digests(ssn):
            assert not any(digest.startswith(key.removeprefix(WITHHELD_KEY_PREFIX)) for key in keys)


async def test_the_stand_in_is_keyed_per_explanation_so_it_cannot_be_enumerated() -> None:
    mapping = HIDING["masked"]
    first = await _explain(mapping)
    second = await _explain(mapping)

    # A fixed key in the code would give the same stand-in every time, and with it a table
    # from every possible SSN to its stand-in.
    assert {r.key for r in first.ranking}.isdisjoint({r.key for r in second.ranking})


async def test_a_key_column_shown_unmasked_to_a_caller_is_shown() -> None:
    explanation = await _explain(_mapping([_ssn()]))

    assert {r.key for r in explanation.ranking} == set(SSNS)
    assert not any(r.key_withheld for r in explanation.ranking)
