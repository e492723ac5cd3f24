"""The store as a synthetic source: one builder for every engine, its security always bound."""

from __future__ import annotations

import pytest

from esra.core._config.mapping import Mapping, Operator, RecordFilter
from esra.core._docstore.store_schema import SEARCHABLE_VIEW
from esra.core._docstore.store_source import (
    DEFAULT_SCOPE_CLAIM,
    STORE_DESCRIPTION,
    STORE_DOMAIN_TAGS,
    STORE_NAME,
    check_scope_claim,
    store_mapping,
    store_source,
)
from esra.core._pipeline.validation import TENANT_CLAIM

TENANT = "acme"

# The engines' own parts, as esra-sqlite and esra-postgres pass them.
ENGINES: dict[str, dict[str, object]] = {
    "fts5": {"text_index": "store_segments_fts"},
    "tsvector": {
        "text_index": "tsv",
        "schema": "esra_store",
        "mapping_id": "document_store_segments",
        "section_column": "label",
        "title_in_text_index": True,
        "document_field": "document",
        "format_operators": frozenset({Operator.EQ, Operator.IN}),
        "updated_returnable": False,
    },
}


def _mapping(engine: str, scope_claim: str = DEFAULT_SCOPE_CLAIM) -> Mapping:
    options = ENGINES[engine]
    return store_mapping(
        TENANT,
        source_id="document_store",
        scope_claim=scope_claim,
        **options,  # type: ignore[arg-type]  # the table's values are the builder's own types
    )


@pytest.mark.parametrize("claim", ["", "esra.tenant_id", "esra.scopes", TENANT_CLAIM])
def test_a_reserved_or_empty_scope_claim_is_refused(claim: str) -> None:
    """A claim the core strips from callers (``esra.*``) would never bind: refused at build."""
    with pytest.raises(ValueError, match="reserved"):
        check_scope_claim(claim)
    for engine in ENGINES:
        with pytest.raises(ValueError, match="reserved"):
            _mapping(engine, scope_claim=claim)


def test_a_caller_claim_is_accepted_as_the_scope_claim() -> None:
    """Any other name is a caller claim, including one that only looks like ESRA's."""
    for claim in (DEFAULT_SCOPE_CLAIM, "groups", "ESRA.scopes", "x.esra."):
        check_scope_claim(claim)
        assert _mapping("fts5", scope_claim=claim).record_filters[1].claim == claim


@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize("claim", [DEFAULT_SCOPE_CLAIM, "groups"])
def test_the_tenant_and_scope_record_filters_are_always_present(engine: str, claim: str) -> None:
    """Whatever an engine passes, the tenant comes from the context and the scope from the
    caller's claim: both record filters, always, on the restricted security columns."""
    mapping = _mapping(engine, scope_claim=claim)
    assert mapping.record_filters == (
        RecordFilter(field="tenant", claim=TENANT_CLAIM, operator=Operator.EQ),
        RecordFilter(field="scope", claim=claim, operator=Operator.IN),
    )
    columns = {rule.field: mapping.field(rule.field) for rule in mapping.record_filters}
    assert {name: spec.column for name, spec in columns.items() if spec} == {
        "tenant": "tenant_id",
        "scope": "scope",
    }


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_tenant_and_scope_are_restricted_never_returned_or_filterable(engine: str) -> None:
    """The security columns never reach a model or a caller, and no plan may filter on them."""
    mapping = _mapping(engine)
    for name in ("tenant", "scope"):
        spec = mapping.field(name)
        assert spec is not None
        assert spec.is_restricted
        assert (spec.is_returnable, spec.is_filterable, spec.is_searchable) == (False,) * 3
    shown = {spec.name for spec in mapping.returnable_fields()}
    assert shown.isdisjoint({"tenant", "scope"})
    assert {"title", "content", "section", "format"} <= shown


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_the_mapping_reads_the_searchable_view_by_document(engine: str) -> None:
    """One record per document over the view of Indexed segments, parts in ordinal order."""
    mapping = _mapping(engine)
    options = ENGINES[engine]
    assert mapping.relation == SEARCHABLE_VIEW
    assert (mapping.record_key, mapping.part_order_column) == ("document_id", "ordinal")
    assert (mapping.title_field, mapping.content_fields) == ("title", ("content",))
    assert mapping.freshness_field == "updated"
    assert mapping.text_index == options["text_index"]
    assert mapping.schema == options.get("schema")
    assert mapping.id == options.get("mapping_id", "document_store-segments")
    # Every field the mapping names is one of its fields.
    named = (mapping.title_field, *mapping.content_fields, mapping.freshness_field)
    assert all(mapping.field(name) is not None for name in named)


def test_the_engine_parts_are_the_only_difference() -> None:
    """The same descriptions the model reads, whichever engine holds the store."""
    fts5, tsvector = _mapping("fts5"), _mapping("tsvector")
    assert (fts5.business_name, fts5.description) == (tsvector.business_name, tsvector.description)
    described = {s.column: s.description for s in fts5.fields}
    for spec in tsvector.fields:
        column = "section" if spec.column == "label" else spec.column
        assert spec.description == described[column]
    # The tsvector weights the title in; FTS5 indexes the body only.
    searchable = {
        m.text_index: [s.name for s in m.fields if s.is_searchable] for m in (fts5, tsvector)
    }
    assert searchable == {"store_segments_fts": ["content"], "tsv": ["title", "content"]}


def test_the_source_carries_the_engine_parts_and_the_shared_metadata() -> None:
    """Ids, kind and connection are the engine's; the metadata defaults are everyone's."""
    source = store_source(TENANT, source_id="docs", provider_kind="kind", connection_ref="conn")
    assert (source.id, source.tenant_id, source.provider_kind, source.connection_ref) == (
        "docs",
        TENANT,
        "kind",
        "conn",
    )
    assert (source.name, source.description, source.domain_tags) == (
        STORE_NAME,
        STORE_DESCRIPTION,
        STORE_DOMAIN_TAGS,
    )
    assert source.freshness
    custom = store_source(
        TENANT,
        source_id="docs",
        provider_kind="kind",
        connection_ref="conn",
        name="Handbook",
        usage_guidance="HR questions",
        languages=("en", "de"),
        priority_weight=2.0,
    )
    assert (custom.name, custom.usage_guidance, custom.languages, custom.priority_weight) == (
        "Handbook",
        "HR questions",
        ("en", "de"),
        2.0,
    )
    assert custom.description == STORE_DESCRIPTION
