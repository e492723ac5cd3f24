"""One ESRA configuration over the real data, used unchanged on SQLite, PostgreSQL and MariaDB.

Sources and mappings speak the business's language (a music store's catalog, a bicycle
maker's product catalog and reviews, its job applicants); the relations and columns they
name are the same on every engine (``_data.py``), and so is every mapping's ``text_index``
name: the FTS5 table on SQLite, the stored ``tsvector`` column on PostgreSQL and the
FULLTEXT index on MariaDB. Mappings carry no schema: each provider is pointed at its own
database object (SQLite file, PostgreSQL ``search_path``, MariaDB database) instead.

Only ``Source.provider_kind`` and ``connection_ref`` differ per engine, because they say
where the data lives; ``snapshot_for`` swaps just those two.
"""

from __future__ import annotations

import attrs

from esra.core._context import CallerIdentity, InvocationContext
from esra.core.config import (
    AccessPolicy,
    BindingMode,
    Capability,
    ConfigSnapshot,
    Exposure,
    FieldSpec,
    FieldType,
    Mapping,
    Operator,
    Source,
    SourceBinding,
)

__all__ = ["CLIENT_APP", "SLUG", "TENANT", "realdata_context", "realdata_snapshot", "snapshot_for"]

TENANT = "realdata"
CLIENT_APP = "realdata-tests"
SLUG = "realdata"
TOP_K = 10

_RANGE = frozenset({Operator.EQ, Operator.LT, Operator.LTE, Operator.GT, Operator.GTE})
_CHOICE = frozenset({Operator.EQ, Operator.NE, Operator.IN})


def _text(name: str, column: str, description: str, *, searchable: bool = True) -> FieldSpec:
    return FieldSpec(
        name=name,
        column=column,
        is_searchable=searchable,
        is_returnable=True,
        description=description,
    )


def _choice(name: str, column: str, description: str) -> FieldSpec:
    return FieldSpec(
        name=name,
        column=column,
        is_searchable=True,
        is_filterable=True,
        is_returnable=True,
        allowed_operators=_CHOICE,
        description=description,
    )


def _number(name: str, column: str, description: str, kind: FieldType) -> FieldSpec:
    return FieldSpec(
        name=name,
        column=column,
        type=kind,
        is_filterable=True,
        is_returnable=True,
        allowed_operators=_RANGE,
        description=description,
    )


def _sources() -> tuple[Source, ...]:
    return (
        Source(
            id="music",
            tenant_id=TENANT,
            name="Music catalog",
            description="The online music store's catalog: every track and song with its "
            "album, artist or band, genre, composer and audio format.",
            usage_guidance="Questions about songs, tracks, albums, artists, bands, composers "
            "and music genres the store sells.",
            exclusion_guidance="Not for bicycles, cycling products or job applicants.",
            domain_tags=("music", "songs", "tracks", "albums", "artists", "genres"),
            example_prompts=("Songs by Iron Maiden", "Which albums has Miles Davis?"),
            freshness="updated when the catalog changes",
            provider_kind="sql",
            connection_ref="realdata",
        ),
        Source(
            id="products",
            tenant_id=TENANT,
            name="Product catalog",
            description="Adventure Works Cycles' product catalog: bikes, frames, components, "
            "clothing and accessories with their descriptions, and customers' product reviews.",
            usage_guidance="Questions about bicycles, bike parts, cycling clothing and "
            "accessories, what a product is made of, prices, and what reviewers say.",
            exclusion_guidance="Not for music or job applicants.",
            domain_tags=("products", "bikes", "bicycles", "components", "reviews", "cycling"),
            example_prompts=("Which mountain bike frame is lightest?", "Reviews of pedals"),
            freshness="updated when the catalog changes",
            provider_kind="sql",
            connection_ref="realdata",
        ),
        Source(
            id="recruiting",
            tenant_id=TENANT,
            name="Job applicants",
            description="Résumés of people who applied for jobs at Adventure Works Cycles: "
            "skills, previous employment, education and location.",
            usage_guidance="Questions about job candidates, applicants, résumés, skills, "
            "experience, qualifications and who to hire.",
            exclusion_guidance="Not for products or music.",
            domain_tags=("recruiting", "candidates", "applicants", "resumes", "hiring", "skills"),
            example_prompts=("Candidates with sales management experience",),
            freshness="updated when someone applies",
            provider_kind="sql",
            connection_ref="realdata",
        ),
    )


def _mappings() -> tuple[Mapping, ...]:
    tracks = Mapping(
        id="tracks",
        tenant_id=TENANT,
        source_id="music",
        business_name="Tracks",
        description="One record per track (song) with its album, artist, genre and composer.",
        relation="tracks",
        text_index="tracks_fts",
        record_key="track_id",
        title_field="name",
        content_fields=("album", "artist", "composer"),
        fields=(
            _text("name", "name", "the track's title"),
            _text("album", "album", "the album the track is on"),
            _text("artist", "artist", "the performing artist or band"),
            _choice("genre", "genre", "Rock, Jazz, Classical, Latin, Metal, Blues, ..."),
            _text("composer", "composer", "who wrote the track"),
            _text("media_type", "media_type", "audio file format", searchable=False),
            _number("milliseconds", "milliseconds", "length in milliseconds", FieldType.INTEGER),
            _number("price", "unit_price", "price in USD", FieldType.NUMBER),
            _number("track_id", "track_id", "catalog number", FieldType.INTEGER),
        ),
    )
    products = Mapping(
        id="products",
        tenant_id=TENANT,
        source_id="products",
        business_name="Products",
        description="One record per product: name, category, model and English description.",
        relation="products",
        text_index="products_fts",
        record_key="product_id",
        title_field="name",
        content_fields=("description",),
        fields=(
            _text("name", "name", "product name"),
            _text("description", "description", "what the product is and is made of"),
            _choice("category", "category", "Bikes, Components, Clothing or Accessories"),
            _choice("subcategory", "subcategory", "Mountain Bikes, Road Frames, Jerseys, ..."),
            _text("model", "model", "the product model"),
            _text("product_number", "product_number", "the product number", searchable=False),
            _text("color", "color", "colour", searchable=False),
            _number("price", "list_price", "list price in USD", FieldType.NUMBER),
            _number("product_id", "product_id", "catalog number", FieldType.INTEGER),
        ),
    )
    reviews = Mapping(
        id="product_reviews",
        tenant_id=TENANT,
        source_id="products",
        business_name="Product reviews",
        description="Customers' reviews of products: rating from 1 to 5 and their comments.",
        relation="product_reviews",
        text_index="product_reviews_fts",
        record_key="review_id",
        title_field="product",
        content_fields=("comments",),
        fields=(
            _text("product", "product", "the reviewed product's name"),
            _text("comments", "comments", "what the reviewer wrote"),
            _text("reviewer", "reviewer", "the reviewer's name", searchable=False),
            _number("rating", "rating", "1 (worst) to 5 (best)", FieldType.INTEGER),
            _number("reviewed_on", "reviewed_on", "when the review was written", FieldType.DATE),
            _number("review_id", "review_id", "review number", FieldType.INTEGER),
        ),
    )
    candidates = Mapping(
        id="job_candidates",
        tenant_id=TENANT,
        source_id="recruiting",
        business_name="Job candidates",
        description="One record per applicant: skills summary, employment history, education.",
        relation="job_candidates",
        text_index="job_candidates_fts",
        record_key="candidate_id",
        title_field="name",
        content_fields=("skills", "experience"),
        fields=(
            _text("name", "name", "the applicant's name"),
            _text("skills", "skills", "the applicant's own summary of their skills"),
            _text("experience", "experience", "previous jobs, employers and duties"),
            _text("education", "education", "degrees, majors and schools"),
            _text("location", "location", "city the applicant lives in", searchable=False),
            _number("candidate_id", "candidate_id", "applicant number", FieldType.INTEGER),
        ),
    )
    return (tracks, products, reviews, candidates)


def realdata_snapshot() -> ConfigSnapshot:
    """Return the engine-neutral configuration snapshot."""
    capability = Capability(
        id="realdata_search",
        tenant_id=TENANT,
        name="Catalog and recruiting search",
        bindings=tuple(SourceBinding(s.id, BindingMode.OPTIONAL) for s in _sources()),
    )
    exposure = Exposure(
        id="realdata-exposure",
        tenant_id=TENANT,
        slug=SLUG,
        capability_id=capability.id,
        audience=frozenset({CLIENT_APP}),
        published=True,
        top_k=TOP_K,
        fragment_chars=200,
    )
    return ConfigSnapshot(
        tenant_id=TENANT,
        version="realdata-1",
        sources=_sources(),
        mappings=_mappings(),
        capabilities=(capability,),
        exposures=(exposure,),
        access_policies=(AccessPolicy.matching(exposure),),
    )


def snapshot_for(provider_kind: str, connection_ref: str) -> ConfigSnapshot:
    """The same snapshot, with every source saying which engine and connection serve it."""
    snapshot = realdata_snapshot()
    return attrs.evolve(
        snapshot,
        sources=tuple(
            attrs.evolve(s, provider_kind=provider_kind, connection_ref=connection_ref)
            for s in snapshot.sources
        ),
    )


def realdata_context(correlation_id: str) -> InvocationContext:
    """An invocation context for the tests' client application."""
    return InvocationContext(
        tenant_id=TENANT,
        client_app_id=CLIENT_APP,
        caller=CallerIdentity(subject="realdata-tester", claims={}),
        exposure_slug=SLUG,
        correlation_id=correlation_id,
    )
