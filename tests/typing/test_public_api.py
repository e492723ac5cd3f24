"""esra.core's public surface: every listed name resolves, and an embedder's program that
uses only those names (plus the fakes in ``esra.core.testing``) type-checks under mypy
strict and runs.

The program below is the typing test the issue asks for: mypy checks it with the rest of
``tests/``, so renaming, moving or retyping a public name breaks the type check, not only
an embedder.
"""

from __future__ import annotations

import importlib

import pytest

import esra.core
from esra.core import (
    AccessPolicy,
    AuditEvent,
    BindingMode,
    CallerIdentity,
    Capability,
    ConfigSnapshot,
    Exposure,
    FieldSpec,
    FieldType,
    InvocationContext,
    Mapping,
    ResponseStatus,
    ResultItem,
    RetrievalResponse,
    Retriever,
    SearchProvider,
    Source,
    SourceBinding,
)
from esra.core.testing import (
    FakeLanguageModel,
    InMemoryAuditSink,
    InMemoryConfigRepository,
    InMemorySearchProvider,
)

TENANT = "acme"


def _snapshot() -> ConfigSnapshot:
    source = Source(
        id="hr",
        tenant_id=TENANT,
        name="HR handbook",
        description="Policies for employees.",
        provider_kind="in_memory",
        connection_ref="memory://hr",
    )
    mapping = Mapping(
        id="policies",
        tenant_id=TENANT,
        source_id="hr",
        business_name="Policies",
        description="One row per policy.",
        relation="policies",
        record_key="policy_id",
        title_field="title",
        content_fields=("body",),
        fields=(
            FieldSpec(name="title", column="title", type=FieldType.TEXT, is_returnable=True),
            FieldSpec(name="body", column="body", type=FieldType.TEXT, is_returnable=True),
        ),
    )
    capability = Capability(
        id="handbook",
        tenant_id=TENANT,
        name="The handbook",
        bindings=(SourceBinding("hr", BindingMode.MANDATORY),),
    )
    exposure = Exposure(
        id="handbook-tool",
        tenant_id=TENANT,
        slug="handbook",
        capability_id="handbook",
        audience=frozenset({"assistant"}),
        published=True,
    )
    return ConfigSnapshot(
        tenant_id=TENANT,
        version="v1",
        sources=(source,),
        mappings=(mapping,),
        capabilities=(capability,),
        exposures=(exposure,),
        access_policies=(AccessPolicy.matching(exposure),),
    )


async def _search(prompt: str) -> tuple[RetrievalResponse, InMemoryAuditSink]:
    provider: SearchProvider = InMemorySearchProvider(
        {"policies": [{"policy_id": 1, "title": "Parental leave", "body": "Sixteen weeks paid."}]}
    )
    audit = InMemoryAuditSink()
    retriever = Retriever(
        config=InMemoryConfigRepository([_snapshot()]),
        providers={"hr": provider},
        model=FakeLanguageModel(),
        audit=audit,
    )
    ctx = InvocationContext(
        tenant_id=TENANT,
        client_app_id="assistant",
        caller=CallerIdentity(subject="alice"),
        exposure_slug="handbook",
        correlation_id="c-1",
    )
    return await retriever.retrieve(ctx, prompt), audit


async def test_an_embedder_using_only_public_names_searches() -> None:
    response, audit = await _search("parental leave")
    assert response.status is ResponseStatus.COMPLETE
    first: ResultItem = response.results[0]
    assert first.title == "Parental leave"
    assert audit.events(AuditEvent.RETRIEVE)


def test_every_public_name_resolves_to_its_defining_module() -> None:
    listed = set(esra.core.__all__) - {"__version__"}
    assert listed == set(esra.core._PUBLIC)
    for name in sorted(listed):
        value = getattr(esra.core, name)
        module = importlib.import_module(esra.core._PUBLIC[name])
        assert getattr(module, name) is value, name


def test_an_unknown_name_is_an_attribute_error() -> None:
    # A type checker refuses the name too: the surface has no catch-all.
    with pytest.raises(AttributeError, match="no_such_name"):
        esra.core.no_such_name  # type: ignore[attr-defined]  # noqa: B018
