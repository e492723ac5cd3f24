"""The internal document store as an ordinary searchable source: a synthetic Source + Mapping.

Nothing in the retrieval path knows the store is special. Its mapping names the
``searchable_segments`` view (only Indexed, non-deleted documents' segments exist there) and
the engine's text index over the segments, so the engine's ordinary provider searches it
like any customer database, read-only. Each view row is one segment; the record key is the
document id, so segments roll up to their document — aggregation keeps the best-scoring row
per key, and that segment's text becomes the result's fragment.

Two record filters are always part of the mapping, and are therefore always bound into the
executed query, failing closed like any other record filter:

- ``tenant_id = <the invocation's tenant>`` through the reserved claim
  ``esra.core._pipeline.validation.TENANT_CLAIM``, which the core takes from the invocation context,
  never from the caller;
- ``scope IN (<the caller's scope claim>)``: the security scope the uploading administrator
  gave the document. A caller without the claim never has the store searched at all
  (``ESRA_SOURCE_DROPPED_MISSING_CLAIM``).

Every engine builds its store source here; an engine passes only what is its own: the
provider kind and connection, the text index and schema the mapping reads, and the few
columns its view names differently.
"""

from __future__ import annotations

from typing import TypedDict, Unpack

from esra.core._config.mapping import FieldSpec, FieldType, Mapping, Operator, RecordFilter
from esra.core._config.source import Source
from esra.core._docstore.store_schema import SEARCHABLE_VIEW
from esra.core._pipeline.validation import TENANT_CLAIM

__all__ = [
    "DEFAULT_SCOPE_CLAIM",
    "STORE_DESCRIPTION",
    "STORE_DOMAIN_TAGS",
    "STORE_NAME",
    "StoreMetadata",
    "check_scope_claim",
    "store_isolation_problem",
    "store_mapping",
    "store_source",
]

DEFAULT_SCOPE_CLAIM = "document_scopes"
STORE_NAME = "Internal documents"
STORE_DESCRIPTION = (
    "Documents uploaded to the organisation's internal document store: policies, handbooks, "
    "guides, reports and other files in text, Markdown, CSV, PDF or Word format."
)
STORE_DOMAIN_TAGS = ("documents", "policies", "handbook")
_FRESHNESS = "updated when documents are uploaded, re-indexed or deleted"
# The core strips every caller claim under this prefix (esra.core._pipeline.validation): a scope
# claim named so would never arrive, and would read as one the core sets itself.
_RESERVED_PREFIX = "esra."
_CHOICE = frozenset({Operator.EQ, Operator.NE, Operator.IN})
# The operators a scope filter may bind with: each admits the caller's scopes only.
_ADMITTING = frozenset({Operator.EQ, Operator.IN})


def check_scope_claim(scope_claim: str) -> None:
    """Refuse a scope claim a caller could never carry.

    Raises:
        ValueError: if ``scope_claim`` is empty or under the reserved ``esra.`` prefix.
    """
    if not scope_claim or scope_claim.startswith(_RESERVED_PREFIX):
        msg = "the scope claim must be a non-empty caller claim outside the reserved esra.*"
        raise ValueError(msg)


def store_isolation_problem(mapping: Mapping) -> str | None:
    """Why a store source searched through ``mapping`` could reach past the caller's tenant,
    scopes or searchable documents (``None``: it cannot).

    The two record filters of ``store_mapping`` are what keeps tenants and scopes apart, and
    the spec lets neither be disabled; but a store source's mapping is the tenant's
    configuration, which its data managers edit, and tenants whose stores are one database
    share its tables. So every engine's store provider opens only over a mapping that reads
    the ``searchable_segments`` view (Indexed, live segments only: never the ``documents``
    table, which holds quarantined, failed and deleted text too), binds the ``tenant_id``
    column to the invocation's tenant (the reserved claim, never one a caller sends) and
    binds the ``scope`` column to a caller claim, admitting only. Further filters narrow
    what a caller sees and are allowed.
    """
    if mapping.relation != SEARCHABLE_VIEW:
        return f"reads {mapping.relation!r}, not the store's {SEARCHABLE_VIEW} view"
    columns = {spec.name: spec.column for spec in mapping.fields}
    bound = [(columns.get(f.field), f.claim, f.operator) for f in mapping.record_filters]
    if ("tenant_id", TENANT_CLAIM, Operator.EQ) not in bound:
        return "does not bind tenant_id to the invocation's tenant"
    if not any(
        column == "scope" and operator in _ADMITTING and _is_caller_claim(claim)
        for column, claim, operator in bound
    ):
        return "does not bind scope to a caller's scope claim"
    return None


def _is_caller_claim(claim: str) -> bool:
    try:
        check_scope_claim(claim)
    except ValueError:
        return False
    return True


class StoreMetadata(TypedDict, total=False):
    """The business metadata the model selects the store source by; each key optional."""

    name: str
    description: str
    usage_guidance: str
    exclusion_guidance: str
    domain_tags: tuple[str, ...]
    example_prompts: tuple[str, ...]
    languages: tuple[str, ...]
    priority_weight: float


def store_source(
    tenant_id: str,
    *,
    source_id: str,
    provider_kind: str,
    connection_ref: str,
    **metadata: Unpack[StoreMetadata],
) -> Source:
    """The tenant's store as a ``Source``.

    Args:
        source_id: the synthetic source's id (each engine has its default).
        provider_kind: the kind the host's provider registry opens it with.
        connection_ref: how that provider finds the store (a file, a connection template).
        metadata: ``StoreMetadata``; ``name``, ``description`` and ``domain_tags`` default
            to ``STORE_NAME``, ``STORE_DESCRIPTION`` and ``STORE_DOMAIN_TAGS``, the rest to
            ``Source``'s defaults.
    """
    return Source(
        id=source_id,
        tenant_id=tenant_id,
        name=metadata.get("name", STORE_NAME),
        description=metadata.get("description", STORE_DESCRIPTION),
        provider_kind=provider_kind,
        connection_ref=connection_ref,
        usage_guidance=metadata.get("usage_guidance", ""),
        exclusion_guidance=metadata.get("exclusion_guidance", ""),
        domain_tags=metadata.get("domain_tags", STORE_DOMAIN_TAGS),
        languages=metadata.get("languages", ("en",)),
        example_prompts=metadata.get("example_prompts", ()),
        freshness=_FRESHNESS,
        priority_weight=metadata.get("priority_weight", 1.0),
    )


def store_mapping(
    tenant_id: str,
    *,
    source_id: str,
    text_index: str,
    mapping_id: str | None = None,
    schema: str | None = None,
    scope_claim: str = DEFAULT_SCOPE_CLAIM,
    section_column: str = "section",
    title_in_text_index: bool = False,
    document_field: str = "document_id",
    format_operators: frozenset[Operator] = _CHOICE,
    updated_returnable: bool = True,
) -> Mapping:
    """The mapping over ``searchable_segments``: one record per document, searched by segment.

    Tenant and scope are restricted fields (never shown to a model or returned) bound from
    claims: the tenant from ``TENANT_CLAIM`` (the invocation's own tenant), the scope from
    the caller's ``scope_claim`` (a string or a tuple of strings).

    Args:
        source_id: the store source's id.
        text_index: the engine's text index over the segments (a ``tsvector`` column, an
            FTS5 table).
        mapping_id: the mapping's id; ``<source_id>-segments`` by default.
        schema: the schema the view lives in, where the engine has schemas.
        scope_claim: the caller claim carrying the document scopes the caller may read.
        section_column: the view's column holding a segment's heading or page.
        title_in_text_index: whether the text index covers the title as well as the body
            (then the title is a searchable field).
        document_field / format_operators / updated_returnable: where the engines' store
            mappings were written apart and differ in what a caller sees or a plan may use:
            the document id field's name, the operators a plan may filter ``format`` with,
            and whether ``updated`` is returned. Each engine keeps its own until that is
            decided once, since changing one changes results or accepted plans.

    Raises:
        ValueError: if ``scope_claim`` is empty or reserved.
    """
    check_scope_claim(scope_claim)
    return Mapping(
        id=mapping_id if mapping_id is not None else f"{source_id}-segments",
        tenant_id=tenant_id,
        source_id=source_id,
        business_name="Document passages",
        description="Passages of the stored documents; each result is one document, shown "
        "with its best-matching passage.",
        relation=SEARCHABLE_VIEW,
        schema=schema,
        text_index=text_index,
        record_key="document_id",
        title_field="title",
        content_fields=("content",),
        fields=_fields(
            section_column=section_column,
            title_in_text_index=title_in_text_index,
            document_field=document_field,
            format_operators=format_operators,
            updated_returnable=updated_returnable,
        ),
        record_filters=(
            RecordFilter(field="tenant", claim=TENANT_CLAIM, operator=Operator.EQ),
            RecordFilter(field="scope", claim=scope_claim, operator=Operator.IN),
        ),
        freshness_field="updated",
        # One row per segment: a fetch joins them in document order, with an exact total.
        part_order_column="ordinal",
    )


def _fields(
    *,
    section_column: str,
    title_in_text_index: bool,
    document_field: str,
    format_operators: frozenset[Operator],
    updated_returnable: bool,
) -> tuple[FieldSpec, ...]:
    return (
        FieldSpec(
            "title",
            "title",
            is_searchable=title_in_text_index,
            is_returnable=True,
            description="the document's title (file name)",
        ),
        FieldSpec(
            "content",
            "body",
            is_searchable=True,
            is_returnable=True,
            description="the text of the part of the document that matched",
        ),
        FieldSpec(
            "section",
            section_column,
            is_returnable=True,
            description="the heading or page of that part",
        ),
        FieldSpec(
            "format",
            "format",
            is_filterable=True,
            is_returnable=True,
            allowed_operators=format_operators,
            description="the file format: txt, md, csv, pdf or docx",
        ),
        FieldSpec(
            document_field,
            "document_id",
            is_returnable=True,
            description="the document's identifier, for fetching its full text",
        ),
        FieldSpec(
            "updated",
            "updated_at",
            type=FieldType.DATE,
            is_returnable=updated_returnable,
            description="when the document was last indexed or changed",
        ),
        # Security columns: bound by record filters, never shown to a model or a caller (a
        # plan filtering on a restricted field is refused before its operator is looked at).
        FieldSpec("tenant", "tenant_id", is_restricted=True),
        FieldSpec("scope", "scope", is_restricted=True),
    )
