"""Tests for esra.core._pipeline.selection: forced sources, validation of the answer, cache."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import attrs
import pytest

from esra.core._pipeline.cache_keys import SELECTION_TTL_S, selection_cache_key
from esra.core._pipeline.scope import EffectiveScope, ScopedSource
from esra.core._pipeline.selection import Selection, select_sources, selection_configuration
from esra.core.codes import AuditEvent, WarningCode
from esra.core.config import BindingMode, RetentionClass
from esra.core.exceptions import ModelOutputError
from esra.core.prompts import Prompt, PromptTask
from esra.core.testing import (
    FakeClock,
    FakeLanguageModel,
    InMemoryAuditSink,
    InMemoryCache,
    Responder,
)
from esra.core.testing._invocations import audited_in_scope
from tests.core.factories import (
    make_context,
    make_exposure,
    make_mapping,
    make_scope,
    make_scoped,
    make_source,
)

REQUEST = "What is the parental leave policy?"


def _answer(*ids: str) -> FakeLanguageModel:
    return FakeLanguageModel({PromptTask.SELECT_SOURCES: lambda _p: json.dumps({"sources": ids})})


def _scope(
    *,
    mandatory: tuple[str, ...] = ("s-man",),
    forced: tuple[str, ...] = ("s-pol",),
    optional: tuple[str, ...] = ("s-opt1", "s-opt2"),
    tenant_id: str = "tenant-a",
    config_version: str = "v1",
    retention: RetentionClass = RetentionClass.STANDARD,
    exposure_id: str = "exp-1",
) -> EffectiveScope:
    scoped: list[ScopedSource] = []
    for ids, mode in (
        (mandatory, BindingMode.MANDATORY),
        (optional, BindingMode.OPTIONAL),
        (forced, BindingMode.POLICY_FORCED),
    ):
        for source_id in ids:
            source = make_source(source_id, tenant_id=tenant_id)
            mapping = make_mapping(f"m-{source_id}", source_id=source_id, tenant_id=tenant_id)
            scoped.append(make_scoped(source, mode=mode, mappings=[mapping]))
    return make_scope(
        scoped,
        tenant_id=tenant_id,
        config_version=config_version,
        exposure=make_exposure(tenant_id=tenant_id, exposure_id=exposure_id, retention=retention),
    )


async def _select(
    scope: EffectiveScope,
    model: FakeLanguageModel,
    *,
    request: str = REQUEST,
    cache: InMemoryCache | None = None,
    audit: InMemoryAuditSink | None = None,
    tenant_id: str = "tenant-a",
) -> Selection:
    async with audited_in_scope(make_context(tenant_id=tenant_id), scope, audit=audit) as run:
        return await select_sources(run, request, model=model, cache=cache)


def _selection_configuration(scope: EffectiveScope) -> str:
    return selection_configuration([s.source for s in scope.optional()], scope.capability)


def _ids(selection: Selection) -> list[str]:
    return [s.source.id for s in selection.sources]


def _prompt_sources(prompt: Prompt) -> list[str]:
    return [json.loads(item.content)["id"] for item in prompt.reference]


async def test_forced_sources_are_selected_and_never_shown_to_the_model() -> None:
    """Mandatory and policy-forced sources are selected without appearing in the prompt; the
    model chooses among the optional ones only, and the result keeps scope order."""
    model = _answer("s-opt2")
    selection = await _select(_scope(), model)
    assert _ids(selection) == ["s-man", "s-opt2", "s-pol"]
    assert selection.warnings == ()
    [prompt] = model.prompts
    assert prompt.task is PromptTask.SELECT_SOURCES
    assert _prompt_sources(prompt) == ["s-opt1", "s-opt2"]
    rendered = prompt.render()
    for hidden in ("s-man", "s-pol", "Source s-man", "Source s-pol"):
        assert hidden not in rendered


async def test_prompt_carries_business_metadata_only() -> None:
    """The selection prompt shows no connection ref, provider kind, mapping or field name."""
    model = _answer()
    await _select(_scope(mandatory=(), forced=()), model)
    rendered = model.prompts[0].render()
    for secret in ("secret://", "in_memory", "m-s-opt1", "tbl_", "col_", "title", "body"):
        assert secret not in rendered


async def test_no_optional_candidates_means_no_model_call() -> None:
    """With only forced sources in scope, the model is not called and they are selected."""
    model = _answer()
    selection = await _select(_scope(optional=()), model)
    assert model.prompts == []
    assert _ids(selection) == ["s-man", "s-pol"]


async def test_model_may_choose_none() -> None:
    """An empty choice selects the forced sources only, without a fallback warning."""
    selection = await _select(_scope(), _answer())
    assert _ids(selection) == ["s-man", "s-pol"]
    assert selection.warnings == ()


async def test_unknown_ids_are_dropped_and_audited_without_their_text() -> None:
    """Ids outside the candidate set (unknown or forced) are dropped, each audited as
    LLM_UNKNOWN_SOURCE_REJECTED, and no audit record contains the id text."""
    audit = InMemoryAuditSink()
    model = _answer("s-opt1", "s-secret-unauthorized", "s-man")
    selection = await _select(_scope(), model, audit=audit)
    assert _ids(selection) == ["s-man", "s-opt1", "s-pol"]
    rejected = audit.events(AuditEvent.LLM_UNKNOWN_SOURCE_REJECTED)
    assert len(rejected) == 2
    assert all(r.tenant_id == "tenant-a" for r in rejected)
    assert "s-secret-unauthorized" not in repr(audit.records)
    [select] = audit.events(AuditEvent.SOURCES_SELECT)
    assert select.dimensions["unknown_rejected_count"] == 2
    assert select.dimensions["chosen_count"] == 1


def _raise_runtime(_prompt: Prompt) -> str:
    raise RuntimeError("model backend exploded: secret detail")


def _raise_contract(_prompt: Prompt) -> str:
    raise ModelOutputError


@pytest.mark.parametrize(
    "responder",
    [_raise_runtime, _raise_contract, lambda _p: "not json", lambda _p: '{"sources": 3}'],
)
async def test_model_failure_falls_back_to_forced_sources(
    responder: Responder,
) -> None:
    """A raising model or an answer outside the contract selects forced sources only, with
    ESRA_SELECTION_FALLBACK and a message free of the failure's text."""
    audit = InMemoryAuditSink()
    model = FakeLanguageModel({PromptTask.SELECT_SOURCES: responder})
    selection = await _select(_scope(), model, audit=audit)
    assert _ids(selection) == ["s-man", "s-pol"]
    [warning] = selection.warnings
    assert warning.code is WarningCode.ESRA_SELECTION_FALLBACK
    assert "secret" not in warning.message
    [record] = audit.events(AuditEvent.SOURCES_SELECT)
    assert record.outcome == "fallback"
    assert record.reason == WarningCode.ESRA_SELECTION_FALLBACK


async def test_select_is_audited_with_counts() -> None:
    """The select record counts forced, candidate and chosen sources and the selected ids."""
    audit = InMemoryAuditSink()
    await _select(_scope(), _answer("s-opt1"), audit=audit)
    [record] = audit.events(AuditEvent.SOURCES_SELECT)
    assert record.outcome == "ok"
    assert record.dimensions["forced_count"] == 2
    assert record.dimensions["candidate_count"] == 2
    assert record.dimensions["chosen_count"] == 1
    assert record.dimensions["selected_source_ids"] == ("s-man", "s-opt1", "s-pol")
    assert REQUEST not in repr(audit.records)


async def test_cache_hit_avoids_the_model_call() -> None:
    """A second, equivalent request (case and spacing differ) is served from the cache."""
    clock = FakeClock()
    cache = InMemoryCache(clock)
    model = _answer("s-opt1")
    first = await _select(_scope(), model, cache=cache)
    second = await _select(
        _scope(), model, cache=cache, request="  what is the PARENTAL leave\tpolicy? "
    )
    assert len(model.prompts) == 1
    assert _ids(second) == _ids(first) == ["s-man", "s-opt1", "s-pol"]


async def test_cache_entry_is_written_under_the_tenant_key_with_ttl() -> None:
    """The chosen ids are cached as a JSON list under the tenant's key for 300 seconds."""
    clock = FakeClock()
    cache = InMemoryCache(clock)
    scope = _scope()
    await _select(scope, _answer("s-opt2"), cache=cache)
    key = selection_cache_key(
        tenant_id="tenant-a",
        exposure_id="exp-1",
        config_version="v1",
        candidate_ids=["s-opt1", "s-opt2"],
        configuration=_selection_configuration(scope),
        request=REQUEST,
    )
    assert cache.keys() == [key]
    assert json.loads(await cache.get(key) or b"null") == ["s-opt2"]
    clock.advance(SELECTION_TTL_S + 1)
    assert await cache.get(key) is None


async def test_a_warm_cache_for_one_tenant_never_serves_another() -> None:
    """Tenant B with identical exposure id, version, candidate ids and prompt still asks the
    model: tenant A's cached selection is never read for it."""
    cache = InMemoryCache()
    model_a = _answer("s-opt1")
    await _select(_scope(tenant_id="tenant-a"), model_a, cache=cache, tenant_id="tenant-a")
    model_b = _answer("s-opt2")
    selection_b = await _select(
        _scope(tenant_id="tenant-b"), model_b, cache=cache, tenant_id="tenant-b"
    )
    assert len(model_b.prompts) == 1
    assert _ids(selection_b) == ["s-man", "s-opt2", "s-pol"]
    stored = cache.keys()
    prefixes = {k.split(":selection:")[0] for k in stored}
    assert len(prefixes) == 2


@pytest.mark.parametrize(
    "changed",
    [
        {"config_version": "v2"},
        {"optional": ("s-opt1", "s-opt2", "s-opt3")},
        {"exposure_id": "exp-2"},
    ],
)
async def test_cache_misses_when_version_candidates_or_exposure_change(
    changed: dict[str, Any],
) -> None:
    """A new configuration version, candidate set or exposure does not reuse the entry."""
    cache = InMemoryCache()
    model = _answer("s-opt1")
    await _select(_scope(), model, cache=cache)
    await _select(_scope(**changed), model, cache=cache)
    assert len(model.prompts) == 2


async def test_cached_ids_are_rechecked_against_the_candidates() -> None:
    """A poisoned cache entry naming a non-candidate id cannot select it."""
    cache = InMemoryCache()
    scope = _scope()
    key = selection_cache_key(
        tenant_id="tenant-a",
        exposure_id="exp-1",
        config_version="v1",
        candidate_ids=["s-opt1", "s-opt2"],
        configuration=_selection_configuration(scope),
        request=REQUEST,
    )
    await cache.set(key, json.dumps(["s-intruder", "s-opt2"]).encode(), SELECTION_TTL_S)
    model = _answer()
    selection = await _select(scope, model, cache=cache)
    assert model.prompts == []
    assert _ids(selection) == ["s-man", "s-opt2", "s-pol"]


async def test_a_corrupt_cache_entry_is_a_miss() -> None:
    """An unreadable cache value is ignored and the model is asked."""
    cache = InMemoryCache()
    scope = _scope()
    key = selection_cache_key(
        tenant_id="tenant-a",
        exposure_id="exp-1",
        config_version="v1",
        candidate_ids=["s-opt1", "s-opt2"],
        configuration=_selection_configuration(scope),
        request=REQUEST,
    )
    await cache.set(key, b"\xff{not json", SELECTION_TTL_S)
    model = _answer("s-opt1")
    assert _ids(await _select(scope, model, cache=cache)) == ["s-man", "s-opt1", "s-pol"]
    assert len(model.prompts) == 1


async def test_fallback_is_not_cached() -> None:
    """A failed selection leaves nothing in the cache, so the next call asks the model again."""
    cache = InMemoryCache()
    await _select(
        _scope(), FakeLanguageModel({PromptTask.SELECT_SOURCES: _raise_runtime}), cache=cache
    )
    assert cache.keys() == []


class SpyCache:
    """A cache that records every access."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def get(self, key: str) -> bytes | None:
        """Record the read; return a value that would select ``s-opt1``."""
        self.calls.append("get")
        return b'["s-opt1"]'

    async def set(self, key: str, value: bytes, ttl_s: float) -> None:
        """Record the write."""
        self.calls.append("set")


async def test_no_prompt_derivatives_disables_cache_reads_and_writes() -> None:
    """Under NO_PROMPT_DERIVATIVES the cache is neither read nor written."""
    cache = SpyCache()
    model = _answer("s-opt2")
    audit = InMemoryAuditSink()
    scope = _scope(retention=RetentionClass.NO_PROMPT_DERIVATIVES)
    async with audited_in_scope(make_context(), scope, audit=audit) as invocation:
        selection = await select_sources(invocation, REQUEST, model=model, cache=cache)
    assert cache.calls == []
    assert len(model.prompts) == 1
    assert _ids(selection) == ["s-man", "s-opt2", "s-pol"]
    assert audit.events(AuditEvent.SOURCES_SELECT)[0].dimensions["cache"] == "disabled"


class BrokenCache:
    """A cache whose backend is down."""

    async def get(self, key: str) -> bytes | None:
        """Fail like an unreachable backend."""
        raise ConnectionError

    async def set(self, key: str, value: bytes, ttl_s: float) -> None:
        """Fail like an unreachable backend."""
        raise ConnectionError


async def test_an_unreachable_cache_does_not_fail_selection() -> None:
    """Cache errors are treated as a miss and the model's choice is used."""
    model = _answer("s-opt1")
    async with audited_in_scope(make_context(), _scope()) as invocation:
        selection = await select_sources(invocation, REQUEST, model=model, cache=BrokenCache())
    assert _ids(selection) == ["s-man", "s-opt1", "s-pol"]
    assert selection.warnings == ()


def test_scope_helper_builds_distinct_tenants() -> None:
    """The test scope for tenant B really is tenant B's (guards the isolation test)."""
    scope = _scope(tenant_id="tenant-b")
    assert {s.source.tenant_id for s in scope.sources} == {"tenant-b"}
    assert {m.tenant_id for s in scope.sources for m in s.mappings} == {"tenant-b"}
    assert scope.exposure.tenant_id == scope.capability.tenant_id == "tenant-b"


def _redescribed(scope: EffectiveScope) -> EffectiveScope:
    # An operator rewrites an optional source's business description and keeps the version.
    sources = tuple(
        attrs.evolve(s, source=attrs.evolve(s.source, description="The parental leave handbook."))
        if s.source.id == "s-opt2"
        else s
        for s in scope.sources
    )
    return attrs.evolve(scope, sources=sources)


def _reprofiled(scope: EffectiveScope) -> EffectiveScope:
    return attrs.evolve(scope, capability=attrs.evolve(scope.capability, model_profile="small"))


def _datamarked(scope: EffectiveScope) -> EffectiveScope:
    return attrs.evolve(scope, capability=attrs.evolve(scope.capability, datamark_untrusted=True))


@pytest.mark.parametrize("change", [_redescribed, _reprofiled, _datamarked])
async def test_cache_misses_when_what_the_model_reads_changes_under_the_same_version(
    change: Callable[[EffectiveScope], EffectiveScope],
) -> None:
    """A version string may name two configurations (a settings file's "3" and workspace
    publication 3, a file edited in place): an entry chosen over other candidate metadata or
    another prompt profile is not served, although version, exposure and candidate ids match."""
    cache = InMemoryCache()
    model = _answer("s-opt1")
    await _select(_scope(), model, cache=cache)
    changed = change(_scope())
    assert changed.config_version == "v1"
    assert [s.source.id for s in changed.optional()] == ["s-opt1", "s-opt2"]

    await _select(changed, model, cache=cache)

    assert len(model.prompts) == 2


def _remapped(scope: EffectiveScope) -> EffectiveScope:
    # Mappings never reach the selection prompt.
    sources = tuple(
        attrs.evolve(s, mappings=(make_mapping("m-other", source_id=s.source.id),))
        for s in scope.sources
    )
    return attrs.evolve(scope, sources=sources)


def _forced_redescribed(scope: EffectiveScope) -> EffectiveScope:
    # Forced sources are never shown to the model.
    sources = tuple(
        attrs.evolve(s, source=attrs.evolve(s.source, description="Rewritten."))
        if s.mode is not BindingMode.OPTIONAL
        else s
        for s in scope.sources
    )
    return attrs.evolve(scope, sources=sources)


@pytest.mark.parametrize("change", [_remapped, _forced_redescribed])
async def test_cache_still_hits_when_only_what_the_model_never_reads_changes(
    change: Callable[[EffectiveScope], EffectiveScope],
) -> None:
    """The key covers what the selection reads, not the whole configuration: a change to
    mappings or to forced sources leaves the optional choice as it was."""
    cache = InMemoryCache()
    model = _answer("s-opt1")
    await _select(_scope(), model, cache=cache)

    selection = await _select(change(_scope()), model, cache=cache)

    assert len(model.prompts) == 1
    assert _ids(selection) == ["s-man", "s-opt1", "s-pol"]
