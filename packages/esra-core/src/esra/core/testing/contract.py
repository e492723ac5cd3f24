"""The reusable ``SearchProvider`` contract suite: one set of tests every provider must pass.

An adapter's test module subclasses ``SearchProviderContract`` and implements
``make_provider`` — the seeding hook — which loads ``CONTRACT_DATASET`` (a ``Mapping`` plus
rows keyed by *physical* column names, with ``CONTRACT_COLUMNS`` giving each column's type
for DDL) into its engine and returns a provider over it::

    class TestMyProviderContract(SearchProviderContract):
        def make_provider(self, dataset, tmp_path):
            seed_my_engine(dataset.mapping, dataset.columns, dataset.rows)
            return MyProvider(...)

Every query is issued by the real validator (``esra.core._pipeline.validation.validate``), so the
suite also proves the provider and validator agree. Expectations use plain single words and
literal phrases whose matching is the same under token-based full-text engines and the
substring-based in-memory fake. Requires ``pytest`` and ``pytest-asyncio``.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Sequence
from collections.abc import Mapping as MappingABC
from pathlib import Path
from typing import Any, ClassVar

import attrs
import pytest

from esra.core._config.capability import (
    BindingMode,
    Capability,
    CapabilityLimits,
    ResponseMode,
    SourceBinding,
)
from esra.core._config.exposure import Exposure
from esra.core._config.mapping import FieldSpec, FieldType, Mapping, Operator, RecordFilter
from esra.core._config.source import Source, SourceHealth
from esra.core._context import CallerIdentity, ClaimValue, InvocationContext
from esra.core._pipeline.scope import EffectiveScope, ScopedSource
from esra.core._pipeline.selection import Selection
from esra.core._pipeline.validation import validate, validate_lookup
from esra.core._pipeline.values import ValidatedQuery
from esra.core._query import PlannedFilter, PlannedQuery, ResultRow
from esra.core.codes import ProviderErrorCode
from esra.core.exceptions import ProviderError, UnvalidatedQueryError
from esra.core.ports import SearchProvider

__all__ = [
    "CONTRACT_COLUMNS",
    "CONTRACT_DATASET",
    "CONTRACT_MAPPING",
    "CONTRACT_ROWS",
    "RESERVED_CHARACTERS",
    "ContractDataset",
    "SearchProviderContract",
    "contract_lookup",
    "contract_query",
]

_TENANT = "t-contract"
_SOURCE = "src-contract"
_APP = "app-contract"
_TIMEOUT_S = 10.0

_ALL = frozenset(Operator)
_TEXT_OPS = frozenset({Operator.EQ, Operator.NE, Operator.IN})

CONTRACT_MAPPING = Mapping(
    id="contract-articles",
    tenant_id=_TENANT,
    source_id=_SOURCE,
    business_name="Articles",
    description="Short articles used by the provider contract suite.",
    relation="contract_articles",
    record_key="art_key",
    title_field="title",
    content_fields=("body",),
    fields=(
        FieldSpec("title", "art_title", is_searchable=True, is_returnable=True),
        # A physical name that needs quoting (space, capitals) on every engine.
        FieldSpec("body", "Art Body", is_searchable=True, is_returnable=True),
        FieldSpec(
            "category", "art_category", is_filterable=True, is_returnable=True,
            allowed_operators=_TEXT_OPS,
        ),
        FieldSpec(
            "year", "art_year", FieldType.INTEGER, is_filterable=True, is_returnable=True,
            allowed_operators=_ALL,
        ),
        FieldSpec("org", "art_org"),
        FieldSpec("secret", "art_secret", is_returnable=True, is_restricted=True),
        FieldSpec(
            "published", "art_published", FieldType.DATE, is_filterable=True,
            is_returnable=True, allowed_operators=_ALL,
        ),
    ),
    text_index="contract_articles_fts",
    record_filters=(RecordFilter(field="org", claim="org"),),
    freshness_field="published",
)  # fmt: skip

# Physical columns in table order (record key first) with the type an engine should use.
CONTRACT_COLUMNS: tuple[tuple[str, FieldType], ...] = (
    ("art_key", FieldType.TEXT),
    ("art_title", FieldType.TEXT),
    ("Art Body", FieldType.TEXT),
    ("art_category", FieldType.TEXT),
    ("art_year", FieldType.INTEGER),
    ("art_org", FieldType.TEXT),
    ("art_secret", FieldType.TEXT),
    ("art_published", FieldType.DATE),
)

_R = tuple[str, str, str, str, int, str, str, str]
_RAW: tuple[_R, ...] = (
    ("a07", "Solar panel maintenance",
     "Clean the solar panel every spring and inspect the inverter.",
     "energy", 2021, "acme", "s-a07", "2021-05-01"),
    ("a03", "Panel discussion on solar policy",
     "The panel debated policy while solar subsidies were reviewed.",
     "energy", 2022, "acme", "s-a03", "2022-03-10"),
    ("a05", "Wind turbine inspection", "Inspect the turbine blades and the inverter housing.",
     "energy", 2020, "acme", "s-a05", "2020-07-15"),
    ("a01", "Quarterly budget report", "The budget covers solar panel purchases for the depot.",
     "finance", 2023, "acme", "s-a01", "2023-01-20"),
    ("a09", "Inverter checklist", "Inverter inverter checklist for the depot.",
     "ops", 2022, "acme", "s-a09", "2022-09-09"),
    # Same text as a09, so the two tie on score and only the key orders them.
    ("a02", "Inverter checklist", "Inverter inverter checklist for the depot.",
     "ops", 2022, "acme", "s-a02", "2022-09-01"),
    ("a04", "Solar panel warranty", "Globex solar panel warranty terms.",
     "energy", 2021, "globex", "s-a04", "2021-02-02"),
    ("a06", "Operators and syntax",
     'Use alpha or beta; the NEAR keyword, "quoted" text, (grouping), c++ notes, x:y ratios, '
     "^caret, -minus, +plus and * star.",
     "docs", 2019, "acme", "s-a06", "2019-04-04"),
    ("a08", "Alpha release", "The alpha build only.", "docs", 2018, "acme", "s-a08",
     "2018-01-01"),
    ("a10", "Beta release", "The beta build only.", "docs", 2018, "acme", "s-a10",
     "2018-06-01"),
)  # fmt: skip

CONTRACT_ROWS: tuple[MappingABC[str, object], ...] = tuple(
    dict(zip((name for name, _ in CONTRACT_COLUMNS), raw, strict=True)) for raw in _RAW
)

# The FTS-style operators and punctuation a term must be able to contain, matched literally.
RESERVED_CHARACTERS: tuple[str, ...] = (
    '"', "*", "(", ")", ":", "^", "-", "+", "NEAR", "AND", "OR", "NOT",
)  # fmt: skip


@attrs.frozen
class ContractDataset:
    """The standard dataset: the mapping, its columns (for DDL) and rows (physical names)."""

    mapping: Mapping
    columns: tuple[tuple[str, FieldType], ...]
    rows: tuple[MappingABC[str, object], ...]


CONTRACT_DATASET = ContractDataset(CONTRACT_MAPPING, CONTRACT_COLUMNS, CONTRACT_ROWS)

# The contract mapping guarded by a record-filter template instead of its record filter: every
# node kind, a restricted field, a multi-valued claim, a coerced claim, a date literal and a
# literal with an escaped quote.
_TEMPLATE_MAPPING = attrs.evolve(
    CONTRACT_MAPPING,
    record_filters=(),
    record_filter_template=(
        "secret IS NOT NULL AND (\n"
        "  (org = {claim:org} AND category IN {claim:categories})\n"
        "  OR (year <= {claim:max_year} AND NOT category IN ('docs', 'it''s'))\n"
        "  OR published >= '2023-01-01'\n"
        ")"
    ),
)


def contract_query(
    provider: SearchProvider,
    *,
    mapping: Mapping = CONTRACT_MAPPING,
    strategy: str = "keyword",
    required: Sequence[str] = (),
    optional: Sequence[str] = (),
    excluded: Sequence[str] = (),
    phrases: Sequence[str] = (),
    filters: Sequence[PlannedFilter] = (),
    fields: Sequence[str] = (),
    limit: int | None = 20,
    claims: MappingABC[str, ClaimValue] | None = None,
) -> ValidatedQuery:
    """Plan one query and have the real validator issue it against ``provider``'s capabilities.

    ``claims`` defaults to ``{"org": "acme"}``, which the mapping's record filter binds.

    Raises:
        AssertionError: if the validator rejects the plan (the suite's plans are all valid).
    """
    source = Source(
        id=mapping.source_id, tenant_id=mapping.tenant_id, name="Contract source",
        description="", provider_kind="contract", connection_ref="contract",
    )  # fmt: skip
    limits = CapabilityLimits(max_rows_per_query=provider.capabilities.max_rows)
    capability = Capability(
        id="cap-contract", tenant_id=mapping.tenant_id, name="Contract",
        bindings=(SourceBinding(source.id, BindingMode.MANDATORY),), limits=limits,
    )  # fmt: skip
    exposure = Exposure(
        id="exp-contract", tenant_id=mapping.tenant_id, slug="contract",
        capability_id=capability.id, audience=frozenset({_APP}), published=True,
    )  # fmt: skip
    scoped = ScopedSource(source, BindingMode.MANDATORY, (mapping,), SourceHealth.HEALTHY)
    scope = EffectiveScope(
        exposure, capability, (scoped,), limits, frozenset({ResponseMode.RESULTS}), "contract"
    )
    ctx = InvocationContext(
        tenant_id=mapping.tenant_id, client_app_id=_APP,
        caller=CallerIdentity("contract-caller", dict(claims or {"org": "acme"})),
        exposure_slug=exposure.slug, correlation_id="contract",
    )  # fmt: skip
    planned = PlannedQuery(
        source_id=source.id, mapping_id=mapping.id, strategy=strategy,
        required_terms=tuple(required), optional_terms=tuple(optional),
        excluded_terms=tuple(excluded), phrases=tuple(phrases), filters=tuple(filters),
        fields=tuple(fields), limit=limit,
    )  # fmt: skip
    outcome = validate(
        [planned], ctx=ctx, selection=Selection((scoped,)), scope=scope,
        capabilities={source.id: provider.capabilities},
    )  # fmt: skip
    if not outcome.queries:
        reasons = [r.reason.value for r in outcome.rejections]
        msg = f"the validator rejected a contract plan: {reasons} {outcome.dropped_sources}"
        raise AssertionError(msg)
    return outcome.queries[0]


def contract_lookup(
    record_key: str,
    *,
    mapping: Mapping = CONTRACT_MAPPING,
    claims: MappingABC[str, ClaimValue] | None = None,
) -> ValidatedQuery:
    """Have the real validator issue a document-fetch lookup of ``record_key``.

    ``claims`` defaults to ``{"org": "acme"}``, which the mapping's record filter binds.
    """
    source = Source(
        id=mapping.source_id, tenant_id=mapping.tenant_id, name="Contract source",
        description="", provider_kind="contract", connection_ref="contract",
    )  # fmt: skip
    scoped = ScopedSource(source, BindingMode.MANDATORY, (mapping,), SourceHealth.HEALTHY)
    ctx = InvocationContext(
        tenant_id=mapping.tenant_id, client_app_id=_APP,
        caller=CallerIdentity("contract-caller", dict(claims or {"org": "acme"})),
        exposure_slug="contract", correlation_id="contract",
    )  # fmt: skip
    query = validate_lookup(ctx, scoped, mapping_id=mapping.id, record_key=record_key)
    if query is None:
        msg = "the validator refused a contract lookup"
        raise AssertionError(msg)
    return query


def _keys(rows: Sequence[ResultRow]) -> list[str]:
    return [row.key for row in rows]


def _texts() -> dict[str, str]:
    return {str(r["art_key"]): f"{r['art_title']} {r['Art Body']}".lower() for r in CONTRACT_ROWS}


@pytest.mark.asyncio
class SearchProviderContract:
    """Tests every ``SearchProvider`` must pass; subclass and implement ``make_provider``.

    Set ``classifies_missing_relation = False`` only for a provider without a real catalog
    (the in-memory fake), which cannot tell a missing relation from an empty one.
    """

    classifies_missing_relation: ClassVar[bool] = True

    def make_provider(self, dataset: ContractDataset, tmp_path: Path) -> SearchProvider:
        """Seed ``dataset`` into the engine under test and return a provider over it."""
        raise NotImplementedError

    def close_provider(self, provider: SearchProvider) -> Awaitable[None] | None:
        """Release what ``make_provider`` opened; may return an awaitable (awaited for you).

        By default calls the provider's ``close()``, synchronous (SQLite) or asynchronous
        (the server providers) alike.
        """
        close = getattr(provider, "close", None)
        result: Awaitable[None] | None = close() if callable(close) else None
        return result

    @pytest.fixture
    async def provider(self, tmp_path: Path) -> AsyncIterator[SearchProvider]:
        """The provider under test, seeded with the standard dataset."""
        provider = self.make_provider(CONTRACT_DATASET, tmp_path)
        yield provider
        closing = self.close_provider(provider)
        if inspect.isawaitable(closing):
            await closing

    async def _run(self, provider: SearchProvider, **plan: Any) -> list[ResultRow]:
        query = contract_query(provider, **plan)
        return list(await provider.execute(query, timeout_s=_TIMEOUT_S))

    async def test_refuses_unvalidated_queries(self, provider: SearchProvider) -> None:
        """A forged ValidatedQuery or a raw plan is refused before anything runs."""
        forged = object.__new__(ValidatedQuery)
        planned = PlannedQuery(_SOURCE, CONTRACT_MAPPING.id, "keyword", optional_terms=("x",))
        for bogus in (forged, planned):
            with pytest.raises(UnvalidatedQueryError):
                await provider.execute(bogus, timeout_s=_TIMEOUT_S)  # type: ignore[arg-type]

    async def test_respects_the_row_cap(self, provider: SearchProvider) -> None:
        """At most ``row_limit`` rows come back, and they are the top of the full ranking."""
        full = await self._run(provider, optional=("inverter", "solar"))
        capped = await self._run(provider, optional=("inverter", "solar"), limit=2)
        assert len(full) > 2
        assert _keys(capped) == _keys(full)[:2]

    async def test_orders_by_score_then_key(self, provider: SearchProvider) -> None:
        """Rows are sorted by score descending, ties by key ascending."""
        rows = await self._run(provider, optional=("inverter",))
        assert set(_keys(rows)) == {"a02", "a05", "a07", "a09"}
        assert rows == sorted(rows, key=lambda r: (-r.score, r.key))
        # a02 and a09 have identical text, so equal scores: only the key separates them.
        assert _keys(rows)[:2] == ["a02", "a09"]
        assert rows[0].score == rows[1].score

    @pytest.mark.parametrize(
        ("filters", "expected"),
        [
            ((PlannedFilter("category", "eq", "energy"),), {"a07", "a03", "a05"}),
            ((PlannedFilter("category", "ne", "energy"),), {"a01", "a09", "a02"}),
            ((PlannedFilter("category", "in", ("finance", "ops")),), {"a01", "a09", "a02"}),
            ((PlannedFilter("year", "gt", 2021),), {"a03", "a01", "a09", "a02"}),
            ((PlannedFilter("year", "gte", 2022),), {"a03", "a01", "a09", "a02"}),
            ((PlannedFilter("year", "lt", 2021),), {"a05"}),
            ((PlannedFilter("year", "lte", 2021),), {"a07", "a05"}),
            ((PlannedFilter("year", "eq", 2022),), {"a03", "a09", "a02"}),
            ((PlannedFilter("year", "in", (2020, 2023)),), {"a05", "a01"}),
            (
                (PlannedFilter("published", "gte", "2022-06-01"),),
                {"a09", "a02", "a01"},
            ),
            (
                (
                    PlannedFilter("category", "eq", "energy"),
                    PlannedFilter("year", "gte", 2021),
                ),
                {"a07", "a03"},
            ),
        ],
    )
    async def test_applies_filters(
        self, provider: SearchProvider, filters: tuple[PlannedFilter, ...], expected: set[str]
    ) -> None:
        """Every structured filter narrows the matches, all of them together (AND)."""
        rows = await self._run(provider, optional=("solar", "inverter"), filters=filters)
        assert set(_keys(rows)) == expected

    @pytest.mark.parametrize(
        ("claims", "expected"),
        [
            ({"org": "acme"}, {"a07", "a01"}),
            ({"org": "globex"}, {"a04"}),
            ({"org": ("acme", "globex")}, {"a07", "a01", "a04"}),
            ({"org": "initech"}, set()),
        ],
    )
    async def test_applies_record_filters(
        self,
        provider: SearchProvider,
        claims: MappingABC[str, ClaimValue],
        expected: set[str],
    ) -> None:
        """The caller's claim restricts rows in the query itself (a tuple claim means IN)."""
        rows = await self._run(provider, phrases=("solar panel",), claims=claims)
        assert set(_keys(rows)) == expected

    @pytest.mark.parametrize(
        ("claims", "expected"),
        [
            (
                {"org": "globex", "categories": ("energy",), "max_year": 2020},
                {"a04", "a05", "a01"},
            ),
            (
                {"org": "acme", "categories": ("ops", "docs"), "max_year": "2017"},
                {"a09", "a02", "a06", "a08", "a10", "a01"},
            ),
            (
                {"org": "initech", "categories": "energy", "max_year": 2021},
                {"a07", "a05", "a04", "a01"},
            ),
        ],
    )
    async def test_applies_a_record_filter_template(
        self,
        provider: SearchProvider,
        claims: MappingABC[str, ClaimValue],
        expected: set[str],
    ) -> None:
        """The template's predicate — claims and literals as binds — decides the rows."""
        rows = await self._run(
            provider, mapping=_TEMPLATE_MAPPING, strategy="recent", claims=claims
        )
        assert set(_keys(rows)) == expected

    @pytest.mark.parametrize(
        ("claims", "expected"),
        [
            ({"org": "globex", "categories": ("energy",), "max_year": 2020}, ["a04"]),
            ({"org": "acme", "categories": ("ops",), "max_year": 2020}, []),
        ],
    )
    async def test_a_lookup_applies_the_record_filter_template(
        self,
        provider: SearchProvider,
        claims: MappingABC[str, ClaimValue],
        expected: list[str],
    ) -> None:
        """A fetch reads a record only if the template admits it for the current claims."""
        query = contract_lookup("a04", mapping=_TEMPLATE_MAPPING, claims=claims)
        assert _keys(await provider.execute(query, timeout_s=_TIMEOUT_S)) == expected

    async def test_a_lookup_reads_one_record_with_every_returnable_field(
        self, provider: SearchProvider
    ) -> None:
        """Document fetch: the record by key, all returnable fields, nothing restricted."""
        rows = list(await provider.execute(contract_lookup("a07"), timeout_s=_TIMEOUT_S))
        assert _keys(rows) == ["a07"]
        values = rows[0].values
        assert set(values) == {"title", "body", "category", "year", "published"}
        assert values["title"] == "Solar panel maintenance"
        assert str(values["published"]).startswith("2021-05-01")

    @pytest.mark.parametrize(
        ("claims", "expected"),
        [
            ({"org": "acme"}, []),
            ({"org": "globex"}, ["a04"]),
            ({"org": ("acme", "globex")}, ["a04"]),
        ],
    )
    async def test_a_lookup_applies_record_filters(
        self,
        provider: SearchProvider,
        claims: MappingABC[str, ClaimValue],
        expected: list[str],
    ) -> None:
        """A fetch reads a record only if the caller's current claims admit it."""
        query = contract_lookup("a04", claims=claims)
        assert _keys(await provider.execute(query, timeout_s=_TIMEOUT_S)) == expected

    @pytest.mark.parametrize(
        "key", ["a07' OR '1'='1", "a07; DROP TABLE contract_articles; --", "a0%", "a0_", "a07x"]
    )
    async def test_a_lookup_key_is_only_ever_data(self, provider: SearchProvider, key: str) -> None:
        """A key that is not a record's key finds nothing, and breaks nothing.

        (Letter case is left out: whether ``A07`` equals ``a07`` is the key column's
        collation, which the source owns — MariaDB's default says it does.)
        """
        assert list(await provider.execute(contract_lookup(key), timeout_s=_TIMEOUT_S)) == []
        rows = await provider.execute(contract_lookup("a07"), timeout_s=_TIMEOUT_S)
        assert _keys(rows) == ["a07"]

    async def test_returns_only_the_projection(self, provider: SearchProvider) -> None:
        """Values are keyed by business names: the projection plus the freshness field only.

        The freshness value comes back so aggregation can weigh it; response assembly applies
        the field allowlist again before anything reaches a caller.
        """
        rows = await self._run(provider, optional=("solar",), fields=("category",))
        assert rows
        by_key = {str(r["art_key"]): r for r in CONTRACT_ROWS}
        for row in rows:
            assert set(row.values) == {"title", "body", "category", "published"}, row.values
            source = by_key[row.key]
            assert row.values["title"] == source["art_title"]
            assert row.values["body"] == source["Art Body"]
            assert row.values["category"] == source["art_category"]
            assert str(row.values["published"]) == source["art_published"]
        default = await self._run(provider, optional=("solar",))
        assert default
        for row in default:
            assert set(row.values) == {"title", "body", "category", "year", "published"}
            assert row.values["year"] == by_key[row.key]["art_year"]

    async def test_phrase_is_stricter_than_keywords(self, provider: SearchProvider) -> None:
        """A phrase needs its words adjacent and in order; required keywords do not."""
        phrase = await self._run(provider, strategy="phrase", phrases=("solar panel",))
        keywords = await self._run(provider, required=("solar", "panel"))
        assert set(_keys(phrase)) == {"a07", "a01"}
        assert set(_keys(keywords)) == {"a07", "a03", "a01"}

    async def test_excluded_terms_are_excluded(self, provider: SearchProvider) -> None:
        """A row containing an excluded term never comes back."""
        rows = await self._run(provider, optional=("solar",), excluded=("budget",))
        assert set(_keys(rows)) == {"a07", "a03"}

    async def test_stable_across_executions(self, provider: SearchProvider) -> None:
        """The same query returns the same rows, scores and order every time."""
        runs = [
            [(r.key, r.score) for r in await self._run(provider, optional=("inverter", "solar"))]
            for _ in range(3)
        ]
        assert runs[0] == runs[1] == runs[2]

    @pytest.mark.parametrize("reserved", RESERVED_CHARACTERS)
    async def test_reserved_characters_in_terms_are_literal(
        self, provider: SearchProvider, reserved: str
    ) -> None:
        """An FTS operator or special character inside a term neither fails nor widens a match."""
        texts = _texts()
        with_alpha = {key for key, text in texts.items() if "alpha" in text}
        for plan in (
            {"required": ("alpha", reserved)},
            {"required": ("alpha",), "optional": (reserved,)},
            {"required": ("alpha",), "excluded": (reserved,)},
            {"phrases": (f"alpha {reserved}",), "required": ("alpha",)},
            {"optional": (f"{reserved}alpha{reserved}",), "required": ("alpha",)},
        ):
            rows = await self._run(provider, **plan)
            assert set(_keys(rows)) <= with_alpha

    @pytest.mark.parametrize(
        ("term", "expected"),
        [
            ("alpha OR beta", {"a06"}),
            ("c++", {"a06"}),
            ("x:y", {"a06"}),
            ("^caret", {"a06"}),
            ("-minus", {"a06"}),
            ("+plus", {"a06"}),
            ("(grouping)", {"a06"}),
            ('"quoted"', {"a06"}),
            ("NEAR", {"a06"}),
            ("* star", {"a06"}),
            ("alpha AND beta", set()),
            ("NOT alpha", set()),
            ("alpha NEAR beta", set()),
            ("NEAR(alpha beta)", set()),
        ],
    )
    async def test_operator_words_match_as_text(
        self, provider: SearchProvider, term: str, expected: set[str]
    ) -> None:
        """Operator syntax in a term is searched for as text, never evaluated."""
        required = await self._run(provider, required=(term,))
        phrase = await self._run(provider, strategy="phrase", phrases=(term,))
        assert set(_keys(required)) == expected
        assert set(_keys(phrase)) == expected

    async def test_missing_relation_is_classified(self, provider: SearchProvider) -> None:
        """A mapping whose relation does not exist fails with a classified code."""
        if not self.classifies_missing_relation:
            pytest.skip("this provider has no catalog to find a relation missing from")
        missing = attrs.evolve(
            CONTRACT_MAPPING,
            id="contract-missing",
            relation="contract_missing",
            text_index="contract_missing_fts",
        )
        query = contract_query(provider, mapping=missing, optional=("solar",))
        with pytest.raises(ProviderError) as raised:
            await provider.execute(query, timeout_s=_TIMEOUT_S)
        assert raised.value.code in {
            ProviderErrorCode.RELATION_NOT_FOUND,
            ProviderErrorCode.TEXT_INDEX_UNAVAILABLE,
        }
