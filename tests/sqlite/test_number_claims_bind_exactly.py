"""A number claim binds exactly or drops the source: live SQLite, both record-filter forms.

Found by a hostile review: a number claim was coerced with ``float()``, so a decimal string
more precise than a double was rounded and a claim strictly below a threshold became the
threshold itself; ``level <= {clearance}`` then served rows above the caller's clearance.
"""

from __future__ import annotations

from collections.abc import Mapping as MappingABC
from pathlib import Path

import attrs
import pytest

from esra.core._config.mapping import FieldSpec, FieldType, Mapping, Operator, RecordFilter
from esra.core._context import ClaimValue
from esra.sqlite import SqliteFts5Provider
from tests._record_templates import query_for
from tests.sqlite.conftest import seed_database

TENANT = "t-contract"
_FIELDS = (
    FieldSpec("title", "doc_title", is_searchable=True, is_returnable=True),
    FieldSpec("body", "doc_body", is_searchable=True, is_returnable=True),
    FieldSpec("level", "doc_level", FieldType.NUMBER, is_restricted=True),
)
FILTERED = Mapping(
    id="lv-docs", tenant_id=TENANT, source_id="src-lv", business_name="Classified notes",
    description="", relation="lv_docs", record_key="doc_key", title_field="title",
    content_fields=("body",), fields=_FIELDS, text_index="lv_docs_fts",
    record_filters=(RecordFilter("level", "clearance", Operator.LTE),),
)  # fmt: skip
TEMPLATED = attrs.evolve(
    FILTERED, record_filters=(), record_filter_template="level <= {claim:clearance}"
)
COLUMNS = (
    ("doc_key", FieldType.TEXT),
    ("doc_title", FieldType.TEXT),
    ("doc_body", FieldType.TEXT),
    ("doc_level", FieldType.NUMBER),
)
ROWS = tuple(
    {"doc_key": f"k{level}", "doc_title": f"Report {level}", "doc_body": "report",
     "doc_level": level}
    for level in (1, 2, 3)
)  # fmt: skip


async def _visible(
    provider: SqliteFts5Provider, mapping: Mapping, claims: MappingABC[str, ClaimValue]
) -> frozenset[str] | None:
    """What a caller holding ``claims`` sees; ``None`` when the source is dropped."""
    query = query_for(provider, claims, mapping=mapping, term="report")
    if query is None:
        return None
    return frozenset(row.key for row in await provider.execute(query, timeout_s=10.0))


@pytest.fixture
def database(tmp_path: Path) -> Path:
    return seed_database(tmp_path / "lv.db", FILTERED, COLUMNS, ROWS)


@pytest.mark.parametrize("mapping", [FILTERED, TEMPLATED], ids=["record_filters", "template"])
async def test_control_an_exact_clearance(database: Path, mapping: Mapping) -> None:
    provider = SqliteFts5Provider(database, mappings=(mapping,))
    try:
        assert await _visible(provider, mapping, {"clearance": "2.5"}) == frozenset({"k1", "k2"})
    finally:
        provider.close()


@pytest.mark.parametrize("mapping", [FILTERED, TEMPLATED], ids=["record_filters", "template"])
async def test_a_clearance_below_three_never_sees_level_three(
    database: Path, mapping: Mapping
) -> None:
    """2.9999999999999999 < 3: the caller may see levels 1 and 2 (or, if the claim cannot be
    bound exactly, nothing — fail closed). ``float()`` rounded it to 3.0 and served level 3."""
    provider = SqliteFts5Provider(database, mappings=(mapping,))
    try:
        seen = await _visible(provider, mapping, {"clearance": "2.9999999999999999"})
    finally:
        provider.close()
    assert seen is None or "k3" not in seen, seen
