"""The internal document store as an ordinary searchable source: a synthetic Source + Mapping.

Nothing in the retrieval path knows the store is special. Its mapping names the
``searchable_segments`` view (only Indexed, non-deleted documents' segments exist there) and
the external-content FTS5 table over the segments, so ``SqliteFts5Provider`` searches it like
any customer database, read-only. Each view row is one segment; the record key is the
document id, so segments roll up to their document — aggregation keeps the best-scoring row
per key, and that segment's text becomes the result's fragment.

Two record filters are always part of the mapping, and are therefore always bound into the
executed query, failing closed like any other record filter:

- ``tenant_id = <the invocation's tenant>`` through the reserved claim
  ``esra.core.pipeline.validation.TENANT_CLAIM``, which the core takes from the invocation context,
  never from the caller;
- ``scope IN (<the caller's scope claim>)``: the security scope the uploading administrator
  gave the document. A caller without the claim never has the store searched at all
  (``ESRA_SOURCE_DROPPED_MISSING_CLAIM``).
"""

from __future__ import annotations

from esra.core.config.mapping import FieldSpec, FieldType, Mapping, Operator, RecordFilter
from esra.core.config.source import Source
from esra.core.pipeline.validation import TENANT_CLAIM
from esra.sqlite.docstore_schema import SEARCHABLE_VIEW, SEGMENTS_FTS

__all__ = ["DEFAULT_SCOPE_CLAIM", "STORE_PROVIDER_KIND", "store_source"]

DEFAULT_SCOPE_CLAIM = "document_scopes"
STORE_PROVIDER_KIND = "sqlite-document-store"

_DESCRIPTION = (
    "Documents uploaded to the organisation's internal document store: policies, handbooks, "
    "guides, reports and other files in text, Markdown, CSV, PDF or Word format."
)
_CHOICE = frozenset({Operator.EQ, Operator.NE, Operator.IN})


def _fields() -> tuple[FieldSpec, ...]:
    return (
        FieldSpec(
            "title", "title", is_returnable=True, description="the document's title (file name)"
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
            "section",
            is_returnable=True,
            description="the heading or page of that part",
        ),
        FieldSpec(
            "format",
            "format",
            is_filterable=True,
            is_returnable=True,
            allowed_operators=_CHOICE,
            description="the file format: txt, md, csv, pdf or docx",
        ),
        FieldSpec(
            "document_id",
            "document_id",
            is_returnable=True,
            description="the document's identifier, for fetching its full text",
        ),
        FieldSpec(
            "updated",
            "updated_at",
            type=FieldType.DATE,
            is_returnable=True,
            description="when the document was last indexed or changed",
        ),
        # Security columns: bound by record filters, never shown to a model or a caller.
        FieldSpec("tenant", "tenant_id", is_restricted=True),
        FieldSpec("scope", "scope", is_restricted=True),
    )


def store_source(
    tenant_id: str,
    *,
    source_id: str = "internal-documents",
    name: str = "Internal documents",
    description: str = _DESCRIPTION,
    usage_guidance: str = "",
    exclusion_guidance: str = "",
    domain_tags: tuple[str, ...] = ("documents", "policies", "handbook"),
    example_prompts: tuple[str, ...] = (),
    languages: tuple[str, ...] = ("en",),
    priority_weight: float = 1.0,
    scope_claim: str = DEFAULT_SCOPE_CLAIM,
    connection_ref: str = "document-store",
    provider_kind: str = STORE_PROVIDER_KIND,
) -> tuple[Source, Mapping]:
    """Return the tenant's store as a ``Source`` and the ``Mapping`` searching it.

    Args:
        tenant_id: the tenant whose store this is (the query binds the invocation's tenant).
        source_id: the synthetic source's id; the mapping's id is ``<source_id>-segments``.
        name / description / usage_guidance / exclusion_guidance / domain_tags /
            example_prompts / languages / priority_weight: business metadata the model
            selects sources by.
        scope_claim: the caller claim carrying the document scopes the caller may read
            (a string or a tuple of strings). It must not start with ``esra.``: those names
            are reserved and never taken from a caller.
        connection_ref: how the host finds the store file for ``SqliteFts5Provider``.
        provider_kind: recorded on the source for the host's provider registry.

    Raises:
        ValueError: if ``scope_claim`` is empty or reserved.
    """
    if not scope_claim or scope_claim.startswith("esra."):
        msg = "the scope claim must be a non-empty caller claim outside the reserved esra.*"
        raise ValueError(msg)
    source = Source(
        id=source_id,
        tenant_id=tenant_id,
        name=name,
        description=description,
        provider_kind=provider_kind,
        connection_ref=connection_ref,
        usage_guidance=usage_guidance,
        exclusion_guidance=exclusion_guidance,
        domain_tags=domain_tags,
        languages=languages,
        example_prompts=example_prompts,
        freshness="updated when documents are uploaded, re-indexed or deleted",
        priority_weight=priority_weight,
    )
    mapping = Mapping(
        id=f"{source_id}-segments",
        tenant_id=tenant_id,
        source_id=source_id,
        business_name="Document passages",
        description="Passages of the stored documents; each result is one document, shown "
        "with its best-matching passage.",
        relation=SEARCHABLE_VIEW,
        text_index=SEGMENTS_FTS,
        record_key="document_id",
        title_field="title",
        content_fields=("content",),
        fields=_fields(),
        record_filters=(
            RecordFilter(field="tenant", claim=TENANT_CLAIM, operator=Operator.EQ),
            RecordFilter(field="scope", claim=scope_claim, operator=Operator.IN),
        ),
        freshness_field="updated",
        # One row per segment: a fetch joins them in document order, with an exact total.
        part_order_column="ordinal",
    )
    return source, mapping
