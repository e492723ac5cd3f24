"""esra.core's public surface: every listed name resolves, and an embedder's program that
uses only those names (plus the fakes in ``esra.core.testing``) type-checks under mypy
strict and runs.

The program below is the typing test the issue asks for: mypy checks it with the rest of
``tests/``, so renaming, moving or retyping a public name breaks the type check, not only
an embedder.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import esra.core
import esra.starlette
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


@pytest.mark.parametrize("package", ["esra.core", "esra.starlette"])
def test_every_public_name_resolves_to_its_defining_module(package: str) -> None:
    facade = importlib.import_module(package)
    listed = set(facade.__all__) - {"__version__"}
    assert listed == set(facade._PUBLIC)
    assert set(dir(facade)) >= listed
    for name in sorted(listed):
        value = getattr(facade, name)
        module = importlib.import_module(facade._PUBLIC[name])
        assert getattr(module, name) is value, name


ADAPTERS = ["sql", "sqlite", "postgres", "mysql", "sqlserver", "oracle", "redis", "llm"]


@pytest.mark.parametrize("package", [f"esra.{name}" for name in ADAPTERS])
def test_every_adapter_exports_what_it_lists(package: str) -> None:
    facade = importlib.import_module(package)
    missing = [name for name in facade.__all__ if not hasattr(facade, name)]
    assert missing == []


def test_importing_the_host_package_imports_neither_the_app_nor_the_pipeline() -> None:
    # The esra commands import esra.starlette first; its surface must not cost them the app
    # (the MCP SDK, Starlette) nor the core's pipeline.
    heavy = "{'mcp', 'starlette', 'esra.core._retriever', 'esra.core._pipeline'}"
    probe = f"import sys, esra.starlette; print(sorted({heavy} & set(sys.modules)))"
    shown = subprocess.run(  # noqa: S603 - this interpreter, a literal program
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert shown.strip() == "[]"
    assert esra.starlette.create_app.__module__ == "esra.starlette._app"


def test_an_unknown_name_is_an_attribute_error() -> None:
    # A type checker refuses the name too: the surface has no catch-all.
    with pytest.raises(AttributeError, match="no_such_name"):
        esra.core.no_such_name  # type: ignore[attr-defined]  # noqa: B018
