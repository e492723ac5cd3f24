"""Embeddings ready before they are needed: the document store's segments warmed at indexing.

With ``[model] kind = "local"``, ``embeddings = true`` and an ``embeddings_cache`` file, the
rerank looks each result text up in that file before encoding it. ``esra worker`` and
``esra ingest`` index documents in another process than ``esra serve``; a ``StoreWarmer``
passed to their ``IngestionWorker`` (``on_indexed``) embeds, right after a document is
indexed, what the rerank will show of each of its segments — through the store's mapping,
once per distinct ``fragment_chars`` of the exposures that search the store — into the same
file. The first question finding the document then encodes only its own request.

A segment longer than an exposure's ``fragment_chars`` is shown cut around the first term a
question matched, so only its excerpt from the start is warmed. Warming never fails
indexing: the worker logs an error by type and goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import Iterable, Iterator
from collections.abc import Mapping as AbcMapping

import attrs

from esra.core.config import ConfigSnapshot, Mapping
from esra.core.docstore import Claim, IndexedContent, installed_store_kinds
from esra.core.prompts import RerankItem, record_item
from esra.core.providers import RowValue
from esra.llm import LocalModel
from esra.starlette._settings import HostSettings

__all__ = ["StorePlan", "StoreWarmer", "open_store_warmer", "store_plans"]

_log = logging.getLogger(__name__)


@attrs.frozen
class StorePlan:
    """How a tenant's store is shown to the rerank: its mappings, name and fragment sizes."""

    mappings: tuple[Mapping, ...]
    source_name: str
    # The distinct ``fragment_chars`` of the exposures that can search the store, ascending.
    fragment_chars: tuple[int, ...]


def _plan(snapshot: ConfigSnapshot, store_kinds: frozenset[str]) -> StorePlan | None:
    source = next((s for s in snapshot.sources if s.provider_kind in store_kinds), None)
    if source is None:
        return None
    binding = {
        c.id for c in snapshot.capabilities if any(b.source_id == source.id for b in c.bindings)
    }
    sizes = sorted(
        {
            e.fragment_chars
            for e in snapshot.exposures
            if e.capability_id in binding
            and (e.source_subset is None or source.id in e.source_subset)
        }
    )
    mappings = snapshot.mappings_of(source.id)
    if not sizes or not mappings:
        return None  # no exposure searches the store: nothing would look the vectors up
    return StorePlan(mappings=mappings, source_name=source.name, fragment_chars=tuple(sizes))


def store_plans(
    snapshots: Iterable[ConfigSnapshot], *, store_kinds: frozenset[str] | None = None
) -> dict[str, StorePlan]:
    """Per tenant whose store some exposure searches, how the rerank is shown its segments.

    ``store_kinds``: the provider kinds that are document stores (default: those the
    installed distributions register under ``esra.document_stores``).
    """
    kinds = installed_store_kinds() if store_kinds is None else store_kinds
    plans: dict[str, StorePlan] = {}
    for snapshot in snapshots:
        plan = _plan(snapshot, kinds)
        if plan is not None:
            plans[snapshot.tenant_id] = plan
    return plans


class StoreWarmer:
    """An ``on_indexed`` hook embedding each indexed document's segments ahead of the rerank.

    Args:
        model: a ``LocalModel`` with an embedder (its ``EmbeddingCache`` file is what the
            serving host reads).
        plans: per tenant, its store's plan (see :func:`store_plans`); other tenants'
            documents are not warmed.
    """

    def __init__(self, model: LocalModel, plans: AbcMapping[str, StorePlan]) -> None:
        self._model = model
        self._plans = dict(plans)

    def items(self, claim: Claim, content: IndexedContent) -> list[RerankItem]:
        """What the rerank will show of each segment, once per mapping and fragment size."""
        plan = self._plans.get(claim.tenant_id)
        if plan is None:
            return []
        items: list[RerankItem] = []
        for segment in content.segments:
            # The segment's row in the store's searchable view, by column: each engine's
            # mapping names its own fields over these columns (SQLite's ``section`` column is
            # PostgreSQL's ``label``).
            columns: dict[str, RowValue] = {
                "title": claim.title,
                "body": segment.body,
                "section": segment.label,
                "label": segment.label,
                "format": claim.format.value,
                "document_id": claim.document_id,
            }
            for mapping in plan.mappings:
                values = {f.name: columns[f.column] for f in mapping.fields if f.column in columns}
                items.extend(
                    record_item(mapping, values, fragment_chars=size, source_name=plan.source_name)
                    for size in plan.fragment_chars
                )
        return items

    async def __call__(self, claim: Claim, content: IndexedContent) -> None:
        """Embed the document's segments now, in a worker thread (blocking CPU work)."""
        items = self.items(claim, content)
        if not items:
            return
        encoded = await asyncio.to_thread(self._model.warm_embeddings, items)
        _log.debug("document %s: %d new vector(s) warmed", claim.document_id, encoded)


@contextlib.contextmanager
def open_store_warmer(settings: HostSettings) -> Iterator[StoreWarmer | None]:
    """The warmer ``settings`` call for, or ``None``; the model it opens is closed on exit.

    Only ``[model] kind = "local"`` with ``embeddings = true`` and an ``embeddings_cache`` file
    warms: vectors kept in this process's memory would serve no other process. A cache that
    cannot be opened (or a missing ``embeddings`` extra) is logged by type and indexing goes
    on without warming.
    """
    model_settings = settings.model
    if not (
        model_settings.kind == "local"
        and model_settings.embeddings
        and model_settings.embeddings_cache is not None
    ):
        yield None
        return
    plans = store_plans(t.snapshot for t in settings.tenants)
    if not plans:
        yield None
        return
    try:
        model = LocalModel.with_embeddings(
            cache_path=model_settings.embeddings_cache,
            cache_entries=model_settings.embeddings_cache_entries,
        )
    except (ImportError, OSError, sqlite3.Error, ValueError) as exc:
        _log.warning(
            "model.embeddings_cache: cannot open %s (%s); documents are indexed without "
            "warming their embeddings",
            model_settings.embeddings_cache,
            type(exc).__name__,
        )
        yield None
        return
    try:
        yield StoreWarmer(model, plans)
    finally:
        model.close()
