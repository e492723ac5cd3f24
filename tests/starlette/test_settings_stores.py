"""Settings: a tenant's document store may be of any installed store kind (issue 14).

A ``postgres-document-store`` source is a server source: its template's password must be a
``${secret:...}`` reference, and it is not a file inside ``databases``. A tenant still has at
most one store, whatever their kinds. Composed for ``esra worker``, the runtime's store is a
request for the store's own kind, with the tenant's options.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import attrs
import pytest

from esra.core._docstore.store_registry import StoreRequest
from esra.core.config import dump_snapshot
from esra.postgres._store_factory import POSTGRES_STORE_KIND, postgres_store_source
from esra.sqlite import store_source
from esra.starlette._bootstrap import Purpose, bootstrap
from esra.starlette._demo.build import build_demo_databases
from esra.starlette._demo.config import demo_snapshot
from esra.starlette._settings import SettingsError, load_settings, parse_settings
from tests.starlette._tokens import AUDIENCE, ISSUER, idp

TENANT = "larkspur"
TEMPLATE = "postgresql://esra_store:${secret:env:LARKSPUR_STORE_PW}@db.internal:5432/esra"


def _settings(directory: Path, *stores: tuple[str, str]) -> Path:
    """The demo tenant plus ``stores`` (kind, connection template or file) as its sources."""
    snapshot = demo_snapshot()
    sources, mappings = list(snapshot.sources), list(snapshot.mappings)
    for number, (kind, connection) in enumerate(stores):
        if kind == POSTGRES_STORE_KIND:
            source, mapping = postgres_store_source(
                TENANT, connection, source_id=f"store-{number}", schema="larkspur_store"
            )
        else:
            source, mapping = store_source(
                TENANT, source_id=f"store-{number}", name="Files", connection_ref=connection
            )
        sources.append(source)
        mappings.append(mapping)
    changed = attrs.evolve(snapshot, sources=tuple(sources), mappings=tuple(mappings))
    (directory / "larkspur.json").write_text(json.dumps(dump_snapshot(changed)))
    (directory / "jwks.json").write_text(json.dumps(idp().jwks()))
    data = directory / "data"
    data.mkdir(exist_ok=True)
    build_demo_databases(data, demo_snapshot())
    path = directory / "esra.toml"
    path.write_text(
        f'[[issuers]]\nissuer = "{ISSUER}"\naudience = "{AUDIENCE}"\njwks_file = "jwks.json"\n'
        f'[[tenants]]\nid = "{TENANT}"\nconfig = "larkspur.json"\ndatabases = "data"\n'
        'outbound_hosts = ["db.internal:5432"]\n'
        '[tenants.secrets]\nenv_names = ["LARKSPUR_STORE_PW"]\n'
        '[tenants.sources.store-0]\nschema = "larkspur_store"\ntext_search_config = "simple"\n'
    )
    return path


async def test_a_postgres_store_is_accepted_and_composed_for_its_kind(tmp_path: Path) -> None:
    settings = load_settings(_settings(tmp_path, (POSTGRES_STORE_KIND, TEMPLATE)))
    async with bootstrap(settings, purpose=Purpose.STORES) as runtime:
        (request,) = runtime.stores.values()
    assert isinstance(request, StoreRequest)
    assert request.source.provider_kind == POSTGRES_STORE_KIND
    assert request.source.connection_ref == TEMPLATE
    assert dict(request.options) == {"schema": "larkspur_store", "text_search_config": "simple"}
    assert [m.id for m in request.mappings] == ["store-0_segments"]
    assert list(runtime.stores) == [TENANT]


def test_a_literal_password_in_the_store_template_is_refused(tmp_path: Path) -> None:
    literal = "postgresql://esra_store:hunter2@db.internal:5432/esra"
    with pytest.raises(SettingsError, match="literal password") as refused:
        load_settings(_settings(tmp_path, (POSTGRES_STORE_KIND, literal)))
    assert "hunter2" not in str(refused.value)


def test_a_tenant_has_at_most_one_store_of_any_kinds(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="at most one document-store source"):
        load_settings(
            _settings(
                tmp_path, (POSTGRES_STORE_KIND, TEMPLATE), ("sqlite-document-store", "store.db")
            )
        )


def test_a_store_kind_that_is_not_installed_is_refused(tmp_path: Path) -> None:
    """Without the store kind registered as a provider kind, the source is refused by name."""
    path = _settings(tmp_path, (POSTGRES_STORE_KIND, TEMPLATE))
    data = tomllib.loads(path.read_text())
    with pytest.raises(SettingsError, match="'postgres-document-store', which no installed"):
        parse_settings(
            data, base=tmp_path, provider_kinds=frozenset({"sqlite", "sqlite-document-store"})
        )
