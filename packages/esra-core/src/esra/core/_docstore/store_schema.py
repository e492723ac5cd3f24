"""What every engine's document store schema shares: its version and the view searched.

Each engine writes its own DDL (``esra.postgres._store_schema``, ``esra.sqlite._docstore_schema``)
but both build the same logical store: the same columns at the same version, and one view,
``searchable_segments``, that admits only the segments of Indexed, non-deleted documents.
A version is a set of columns the repositories and the store source rely on, so it is
defined once here and each engine's migrations must reach exactly it.
"""

from __future__ import annotations

__all__ = ["SEARCHABLE_VIEW", "STORE_SCHEMA_VERSION"]

# Version 1: documents, segments, the searchable view. Version 2: ownership, the reserved
# edit columns, uploaded_by, failure_breach and store_settings. Version 3: the audit outbox
# (the operators' actions' records, held with the action until the audit sink has them).
# Version 4: each document's ``claim_seq``, the claim counter that fences a claim's writes
# (``attempts`` cannot: a re-index resets it).
STORE_SCHEMA_VERSION = 4

# The relation a store source's mapping names; each engine's DDL creates it under this name.
SEARCHABLE_VIEW = "searchable_segments"
