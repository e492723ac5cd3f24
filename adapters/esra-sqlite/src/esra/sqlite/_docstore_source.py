"""The SQLite document store as a searchable source: the core's store source, on FTS5.

The source, its mapping and their record filters are ``esra.core._docstore.store_source``'s,
as for every engine; this module adds only what is SQLite's: the provider kind, the
connection reference a host resolves to the store file, the external-content FTS5 table
over the segments (``SqliteFts5Provider`` joins it to ``searchable_segments`` on ``rowid``),
and the ids embedders have called ``store_source`` with.
"""

from __future__ import annotations

from typing import Unpack

from esra.core import docstore as shared
from esra.core.config import Mapping, Source
from esra.core.docstore import DEFAULT_SCOPE_CLAIM, StoreMetadata
from esra.sqlite._docstore_schema import SEGMENTS_FTS

__all__ = ["DEFAULT_SCOPE_CLAIM", "STORE_PROVIDER_KIND", "store_source"]

STORE_PROVIDER_KIND = "sqlite-document-store"


def store_source(
    tenant_id: str,
    *,
    source_id: str = "internal-documents",
    scope_claim: str = DEFAULT_SCOPE_CLAIM,
    connection_ref: str = "document-store",
    provider_kind: str = STORE_PROVIDER_KIND,
    **metadata: Unpack[StoreMetadata],
) -> tuple[Source, Mapping]:
    """Return the tenant's store as a ``Source`` and the ``Mapping`` searching it.

    Args:
        tenant_id: the tenant whose store this is (the query binds the invocation's tenant).
        source_id: the synthetic source's id; the mapping's id is ``<source_id>-segments``.
        scope_claim: the caller claim carrying the document scopes the caller may read
            (a string or a tuple of strings). It must not start with ``esra.``: those names
            are reserved and never taken from a caller.
        connection_ref: how the host finds the store file for ``SqliteFts5Provider``.
        provider_kind: recorded on the source for the host's provider registry.
        metadata: ``name``, ``description``, ``usage_guidance``, ``exclusion_guidance``,
            ``domain_tags``, ``example_prompts``, ``languages``, ``priority_weight``: the
            business metadata the model selects sources by (``StoreMetadata``).

    Raises:
        ValueError: if ``scope_claim`` is empty or reserved.
    """
    mapping = shared.store_mapping(
        tenant_id,
        source_id=source_id,
        mapping_id=f"{source_id}-segments",
        text_index=SEGMENTS_FTS,
        scope_claim=scope_claim,
        # The view calls the segment's label ``section``; FTS5 indexes the body's text only.
        section_column="section",
        title_in_text_index=False,
    )
    source = shared.store_source(
        tenant_id,
        source_id=source_id,
        provider_kind=provider_kind,
        connection_ref=connection_ref,
        **metadata,
    )
    return source, mapping
