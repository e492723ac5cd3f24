"""The embedded default: what ``esra serve`` runs without ``--config``.

The Larkspur Cycles demo enterprise (three SQLite sources, rebuilt in a temporary directory
at each start, which the model selects among) plus the tenant's internal document store
(``document-store.db`` in the data directory, kept between runs; bound mandatory, so searched
on every question), searched with the offline
``LocalModel``, behind one exposure that also publishes its fetch tool. Tokens come
from the development issuer (``esra dev-token``), the only issuer trusted here.

The store starts Disabled, exactly like a configured one: ``esra serve`` creates no file and
no schema. It is initialised by the audited administrative action — enable, then initialise,
through the admin API or the portal — or by the first ``esra ingest``, which takes that same
action on the user's behalf as ``cli:<OS user>`` and says so (``esra.starlette._store_init``).
Until then the store is not a source yet: searches answer from the demo sources alone,
complete, and a running host takes the store as Ready as soon as it finds its schema
(``esra.starlette._stores``).

What administrators change through the admin API outlives a restart too: the configuration
workspaces (drafts, history, publications), the connection secrets (encrypted with the
keyring ``secret-keyring.json``, generated ``chmod 600`` on the first start) and the audit
log all live in ``state.db`` in the data directory. Once the tenant's configuration was
changed through the API, its publication there is what is served, not this module's
snapshot. SQLite sources modelled through the API name their files inside the data
directory's ``databases/``.
"""

from __future__ import annotations

import attrs

from esra.core.config import BindingMode, ConfigSnapshot, Mapping, Source, SourceBinding
from esra.sqlite import store_source
from esra.starlette._demo.config import CLIENT_APP, SLUG, TENANT, demo_snapshot

__all__ = [
    "EMBEDDED_CLIENT_APP",
    "EMBEDDED_SLUG",
    "EMBEDDED_TENANT",
    "STORE_FILE",
    "embedded_snapshot",
]

EMBEDDED_TENANT = TENANT
EMBEDDED_CLIENT_APP = CLIENT_APP
EMBEDDED_SLUG = SLUG
STORE_FILE = "document-store.db"


def _document_store() -> tuple[Source, Mapping]:
    return store_source(
        TENANT,
        description="Files uploaded to Larkspur Cycles' internal document store: manuals, "
        "memos and reports.",
        domain_tags=("uploaded files", "manuals", "memos", "reports"),
    )


def embedded_snapshot() -> ConfigSnapshot:
    """The demo tenant's configuration, plus its document store and the fetch tool.

    The store is bound ``MANDATORY``: searched on every invocation, never left to source
    selection. Its business metadata is written before anything is uploaded, so it cannot
    say what ``esra ingest`` later puts in it, and a selector judging by that metadata (any
    model, not only the lexical ``LocalModel``) passes it over for a question whose words
    fit another source better — the HR handbook for a leave question answered only by an
    ingested handbook page. It is the tenant's own governed corpus, its record filters still
    bind tenant and scope into every query (a caller without the scope claim is told the
    store was not searched), and an empty store costs one indexed query that finds nothing.
    The demo databases stay ``OPTIONAL``, for the model to choose among.
    """
    demo = demo_snapshot()
    store, store_mapping = _document_store()
    return attrs.evolve(
        demo,
        version=f"{demo.version}+embedded",
        sources=(*demo.sources, store),
        mappings=(*demo.mappings, store_mapping),
        capabilities=tuple(
            attrs.evolve(c, bindings=(*c.bindings, SourceBinding(store.id, BindingMode.MANDATORY)))
            for c in demo.capabilities
        ),
        exposures=tuple(attrs.evolve(e, fetch_enabled=True) for e in demo.exposures),
    )
