"""Configuration model: clamping, cross-reference checks, and the cattrs round trip."""

from __future__ import annotations

import attrs
import pytest

from esra.core.codes import ErrorCode
from esra.core.config import (
    ConfigSnapshot,
    MaskingRule,
    RecordFilter,
    clamp_max_queries,
    dump_snapshot,
    load_snapshot,
)
from esra.core.exceptions import ConfigurationError
from tests.core.factories import (
    make_capability,
    make_exposure,
    make_field,
    make_mapping,
    make_snapshot,
    make_source,
)


@pytest.mark.parametrize(
    ("configured", "effective"), [(-5, 1), (0, 1), (1, 1), (3, 3), (20, 20), (21, 20), (999, 20)]
)
def test_max_queries_per_source_is_clamped_to_1_through_20(configured: int, effective: int) -> None:
    """MaxQueriesPerSource is clamped into 1..20 whatever the admin typed."""
    assert clamp_max_queries(configured) == effective
    assert make_source(max_queries_per_source=configured).max_queries_per_source == effective


def test_max_queries_per_source_defaults_to_three() -> None:
    """The default ceiling is three queries per source."""
    assert make_source().max_queries_per_source == 3


def test_rerank_weights_default_to_seventy_thirty() -> None:
    """A capability reranks 0.7 semantic / 0.3 lexical unless configured otherwise."""
    weights = make_capability(["s-1"]).rerank_weights
    assert (weights.semantic, weights.lexical) == (0.7, 0.3)


def test_fetch_is_off_by_default() -> None:
    """An exposure publishes no fetch tool unless that is decided explicitly."""
    assert make_exposure().fetch_enabled is False


def test_snapshot_rejects_an_object_of_another_tenant() -> None:
    """A cross-tenant reference is rejected in the domain, not discovered at run time."""
    with pytest.raises(ConfigurationError, match="another tenant") as raised:
        make_snapshot([make_source("s-1"), make_source("s-2", tenant_id="tenant-b")])
    assert raised.value.code is ErrorCode.ESRA_CONFIGURATION_INVALID


def test_snapshot_rejects_duplicate_source_names_within_a_tenant() -> None:
    """Names are unique within a tenant."""
    with pytest.raises(ConfigurationError, match="duplicate source name"):
        make_snapshot([make_source("s-1", name="Same"), make_source("s-2", name="Same")])


def test_snapshot_rejects_a_binding_to_an_unknown_source() -> None:
    """A capability can only bind sources of the same snapshot."""
    with pytest.raises(ConfigurationError, match="unknown source"):
        make_snapshot([make_source("s-1")], capability=make_capability(["s-1", "s-404"]))


def test_snapshot_rejects_a_mapping_naming_an_unknown_field() -> None:
    """Masking, record filters and freshness must name fields the mapping has."""
    mapping = make_mapping("m-s-1", masking=(MaskingRule(field="nope"),))
    with pytest.raises(ConfigurationError, match="unknown field"):
        make_snapshot([make_source("s-1")], mappings=[mapping])
    mapping = make_mapping("m-s-1", record_filters=(RecordFilter(field="ghost", claim="c"),))
    with pytest.raises(ConfigurationError, match="unknown field"):
        make_snapshot([make_source("s-1")], mappings=[mapping])


@pytest.mark.parametrize("claim", ["esra.subject", "ESRA.subject", "Esra.Tenant_Id", "esra."])
def test_snapshot_rejects_a_record_filter_on_an_undefined_reserved_claim(claim: str) -> None:
    """A structured record filter, like a template, may name no ``esra.*`` claim but the
    defined ``esra.tenant_id``. The host strips only lower-case ``esra.`` claims from a token,
    so a filter on ``ESRA.subject`` would have bound whatever the caller put there."""
    mapping = make_mapping("m-s-1", record_filters=(RecordFilter(field="title", claim=claim),))
    with pytest.raises(ConfigurationError, match="reserved claim"):
        make_snapshot([make_source("s-1")], mappings=[mapping])


def test_snapshot_accepts_a_record_filter_on_the_tenant_claim() -> None:
    mapping = make_mapping(
        "m-s-1", record_filters=(RecordFilter(field="title", claim="esra.tenant_id"),)
    )
    assert make_snapshot([make_source("s-1")], mappings=[mapping]).mappings == (mapping,)


def test_snapshot_rejects_a_restricted_title_field() -> None:
    """Titles and fragments reach every caller, so they must be returnable, unrestricted."""
    fields = (make_field("title", restricted=True), make_field("body"))
    with pytest.raises(ConfigurationError, match="returnable"):
        make_snapshot([make_source("s-1")], mappings=[make_mapping("m-s-1", fields=fields)])


def test_snapshot_round_trips_through_the_converter() -> None:
    """dump_snapshot and load_snapshot are inverse: import/export loses nothing."""
    mapping = make_mapping(
        "m-s-1",
        masking=(MaskingRule(field="body"),),
        record_filters=(RecordFilter(field="title", claim="region"),),
    )
    snapshot = make_snapshot([make_source("s-1", domain_tags=("hr",))], mappings=[mapping])
    assert load_snapshot(dump_snapshot(snapshot)) == snapshot


def test_loading_an_unknown_key_is_a_configuration_error() -> None:
    """A typo in an imported document is reported, not silently ignored."""
    document = dump_snapshot(make_snapshot([make_source("s-1")]))
    document["sources"][0]["descripton"] = "typo"
    with pytest.raises(ConfigurationError):
        load_snapshot(document)


def test_loading_an_inconsistent_document_is_a_configuration_error() -> None:
    """Cross-reference checks also run on import."""
    document = dump_snapshot(make_snapshot([make_source("s-1")]))
    document["mappings"][0]["source_id"] = "s-404"
    with pytest.raises(ConfigurationError, match="unknown source"):
        load_snapshot(document)


def test_snapshot_lookups() -> None:
    """Lookups find objects by id and slug and return None otherwise."""
    snapshot = make_snapshot([make_source("s-1")])
    assert isinstance(snapshot, ConfigSnapshot)
    assert snapshot.source("s-1") is not None
    assert snapshot.source("s-2") is None
    assert snapshot.exposure_by_slug("hr_search") is not None
    assert snapshot.mappings_of("s-1")[0].id == "m-s-1"
    assert attrs.has(type(snapshot))


@pytest.mark.parametrize("fetch_enabled", [True, False])
def test_a_slug_may_not_take_another_exposures_fetch_tool_name(fetch_enabled: bool) -> None:
    """Tool names, not only slugs, are unique: ``a_fetch`` is ``a``'s fetch tool when on."""
    plain = make_exposure(exposure_id="e-a", slug="a", fetch_enabled=fetch_enabled)
    other = make_exposure(exposure_id="e-b", slug="a_fetch", published=False)
    snapshot = make_snapshot([make_source("s-1")], exposure=plain)
    if fetch_enabled:
        with pytest.raises(ConfigurationError, match="duplicate tool name"):
            attrs.evolve(snapshot, exposures=(plain, other))
    else:
        assert len(attrs.evolve(snapshot, exposures=(plain, other)).exposures) == 2


@pytest.mark.parametrize("name", ["size_cap_chars", "fragment_chars"])
@pytest.mark.parametrize("value", [0, -1, -20_000])
def test_an_exposure_size_below_one_character_is_a_configuration_error(
    name: str, value: int
) -> None:
    """A cap or fragment of no characters would answer every search and fetch with nothing
    (fetch refuses every record under such a cap): refused when the document is loaded."""
    document = dump_snapshot(make_snapshot([make_source("s-1")]))
    document["exposures"][0][name] = value
    with pytest.raises(ConfigurationError, match=name):
        load_snapshot(document)
