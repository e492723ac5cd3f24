"""A record-filter template dataset shared by the in-memory, SQLite, PostgreSQL and MySQL tests.

The mapping ``rt-docs`` is guarded by::

    region = {claim:region} OR (owner = {claim:sub} AND NOT archived = TRUE)

Its rows are chosen so that each branch, and SQL's three-valued logic, decides at least one
row: ``d5`` has a NULL ``archived`` (``NOT NULL = TRUE`` is unknown, so its owner does not see
it through the second branch) and ``d7`` a NULL ``region``. Every engine must return exactly
``CALLERS``' expected keys; the in-memory fake is held to the same table.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from collections.abc import Mapping as MappingABC

import attrs

from esra.core._config.capability import (
    BindingMode,
    Capability,
    CapabilityLimits,
    ResponseMode,
    SourceBinding,
)
from esra.core._config.exposure import Exposure
from esra.core._config.mapping import FieldSpec, FieldType, Mapping
from esra.core._config.source import Source, SourceHealth
from esra.core._context import CallerIdentity, ClaimValue, InvocationContext
from esra.core._pipeline.scope import EffectiveScope, ScopedSource
from esra.core._pipeline.selection import Selection
from esra.core._pipeline.validation import validate
from esra.core._pipeline.values import ValidatedQuery
from esra.core._query import PlannedQuery
from esra.core.ports import SearchProvider

__all__ = [
    "CALLERS",
    "CLASSIC_PAYLOADS",
    "COLUMNS",
    "DROPPED_PAYLOADS",
    "MAPPING",
    "ROWS",
    "SEARCH_TERM",
    "TEMPLATE",
    "Caller",
    "assert_payloads_see_nothing",
    "query_for",
    "visible_keys",
]

TEMPLATE = "region = {claim:region} OR (owner = {claim:sub} AND NOT archived = TRUE)"
SEARCH_TERM = "report"

MAPPING = Mapping(
    id="rt-docs",
    tenant_id="t-contract",
    source_id="src-contract",
    business_name="Regional reports",
    description="Reports guarded by a record-filter template.",
    relation="rt_docs",
    record_key="doc_key",
    title_field="title",
    content_fields=("body",),
    fields=(
        FieldSpec("title", "doc_title", is_searchable=True, is_returnable=True),
        FieldSpec("body", "doc_body", is_searchable=True, is_returnable=True),
        FieldSpec("region", "doc_region", is_restricted=True),
        FieldSpec("owner", "Doc Owner", is_restricted=True),
        FieldSpec("archived", "doc_archived", FieldType.BOOLEAN),
    ),
    text_index="rt_docs_fts",
    record_filter_template=TEMPLATE,
)

COLUMNS: tuple[tuple[str, FieldType], ...] = (
    ("doc_key", FieldType.TEXT),
    ("doc_title", FieldType.TEXT),
    ("doc_body", FieldType.TEXT),
    ("doc_region", FieldType.TEXT),
    ("Doc Owner", FieldType.TEXT),
    ("doc_archived", FieldType.BOOLEAN),
)

_RAW: tuple[tuple[str, str | None, str, bool | None], ...] = (
    ("d1", "emea", "alice", False),
    ("d2", "emea", "bob", True),
    ("d3", "apac", "alice", False),
    ("d4", "apac", "alice", True),
    ("d5", "apac", "alice", None),
    ("d6", "amer", "bob", False),
    ("d7", None, "bob", False),
)
ROWS: tuple[MappingABC[str, object], ...] = tuple(
    {
        "doc_key": key,
        "doc_title": f"Regional report {key}",
        "doc_body": f"The {region or 'global'} report for {owner}.",
        "doc_region": region,
        "Doc Owner": owner,
        "doc_archived": archived,
    }
    for key, region, owner, archived in _RAW
)


@attrs.frozen
class Caller:
    """A caller's claims and the keys the template lets them see."""

    name: str
    claims: MappingABC[str, ClaimValue]
    expected: frozenset[str]


CALLERS: tuple[Caller, ...] = (
    # emea rows, plus alice's unarchived ones (d5's NULL archived is unknown: not seen).
    Caller("alice-emea", {"region": "emea", "sub": "alice"}, frozenset({"d1", "d2", "d3"})),
    # apac rows (d5 included: the region branch is TRUE), plus bob's unarchived ones.
    Caller("bob-apac", {"region": "apac", "sub": "bob"}, frozenset({"d3", "d4", "d5", "d6", "d7"})),
    Caller("nobody", {"region": "antarctica", "sub": "carol"}, frozenset()),
)

# Hand-picked payloads that run everywhere; the external corpus adds thousands more.
CLASSIC_PAYLOADS: tuple[str, ...] = (
    "' OR '1'='1",
    "emea' OR 'x'='x",
    "emea'; DROP TABLE rt_docs; --",
    '" OR ""="',
    "') OR ('1'='1",
    "emea\\' OR 1=1 #",
    "1 OR 1=1",
    "%",
    "_",
    "*",
    "alice' /*",
    "NULL",
    "TRUE",
)
# Claims holding characters collations ignore ('\x00emea' equals 'emea' under MySQL's
# utf8mb4_unicode_ci): the validator refuses to bind them, so the source is dropped.
DROPPED_PAYLOADS: tuple[str, ...] = ("\x00emea", "emea\x00", "\u200bemea", "em\x1bea")


def query_for(
    provider: SearchProvider,
    claims: MappingABC[str, ClaimValue],
    *,
    mapping: Mapping = MAPPING,
    term: str = SEARCH_TERM,
) -> ValidatedQuery | None:
    """Have the real validator issue a keyword query for ``term`` over ``mapping`` (the
    template contract's by default) for a caller holding ``claims``.

    Returns ``None`` when the validator drops the source because a claim cannot be bound;
    any other outcome (a rejected plan) fails the test, so "saw nothing" is never vacuous.
    """
    source = Source(
        id=mapping.source_id, tenant_id=mapping.tenant_id, name="Template source",
        description="", provider_kind="test", connection_ref="test",
    )  # fmt: skip
    limits = CapabilityLimits(max_rows_per_query=provider.capabilities.max_rows)
    capability = Capability(
        id="cap-rt", tenant_id=mapping.tenant_id, name="Templates",
        bindings=(SourceBinding(source.id, BindingMode.MANDATORY),), limits=limits,
    )  # fmt: skip
    exposure = Exposure(
        id="exp-rt", tenant_id=mapping.tenant_id, slug="rt", capability_id=capability.id,
        audience=frozenset({"app-rt"}), published=True,
    )  # fmt: skip
    scoped = ScopedSource(source, BindingMode.MANDATORY, (mapping,), SourceHealth.HEALTHY)
    scope = EffectiveScope(
        exposure, capability, (scoped,), limits, frozenset({ResponseMode.RESULTS}), "rt"
    )
    ctx = InvocationContext(
        tenant_id=mapping.tenant_id, client_app_id="app-rt",
        caller=CallerIdentity("rt-caller", dict(claims)), exposure_slug="rt",
        correlation_id="rt",
    )  # fmt: skip
    planned = PlannedQuery(source.id, mapping.id, "keyword", optional_terms=(term,))
    outcome = validate(
        [planned], ctx=ctx, selection=Selection((scoped,)), scope=scope,
        capabilities={source.id: provider.capabilities},
    )  # fmt: skip
    if outcome.dropped_sources == (source.id,):
        return None
    assert outcome.rejections == (), outcome.rejections
    (query,) = outcome.queries
    return query


async def visible_keys(
    provider: SearchProvider, claims: MappingABC[str, ClaimValue]
) -> frozenset[str] | None:
    """The keys ``provider`` returns to a caller with ``claims``; ``None`` if dropped."""
    query = query_for(provider, claims)
    if query is None:
        return None
    return frozenset(row.key for row in await provider.execute(query, timeout_s=10.0))


def _refused(text: str) -> bool:
    """Whether ``coerce_claim`` refuses ``text``: a character collations ignore, or
    whitespace at either end (PAD SPACE collations ignore trailing spaces)."""
    ignorable = any(unicodedata.category(ch) in {"Cc", "Cf", "Cs", "Zl", "Zp"} for ch in text)
    return ignorable or text != text.strip()


async def assert_payloads_see_nothing(provider: SearchProvider, payloads: Iterable[str]) -> int:
    """Each payload as every claim returns no row and raises nothing; returns how many ran.

    A payload is dropped by the validator exactly when ``coerce_claim`` refuses it (a
    character collations ignore, or padding whitespace); every other one is executed — so
    "saw nothing" is a database answer, not a skip.
    """
    ran = 0
    for payload in payloads:
        keys = await visible_keys(provider, {"region": payload, "sub": payload})
        if keys is None:
            assert _refused(payload), payload
            continue
        assert not _refused(payload), payload
        assert keys == set(), payload
        ran += 1
    return ran
