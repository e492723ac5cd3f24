"""The document-store examples in docs/host.md ("Document stores from settings") run as written:
the Python block builds the store's source and mapping, and the TOML block, with them in the
tenant's configuration, is accepted and composed as a PostgreSQL store request."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from esra.core.config import ConfigSnapshot, dump_snapshot
from esra.starlette._bootstrap import Purpose, bootstrap
from esra.starlette._settings import load_settings
from tests.starlette._tokens import AUDIENCE, ISSUER, idp

DOC = Path(__file__).parents[2] / "docs" / "host.md"
SECTION = "### Document stores from settings"


def _blocks(language: str) -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index(SECTION) :]
    section = section[: section.index("\n### ", len(SECTION))]
    return re.findall(rf"```{language}\n(.*?)```", section, flags=re.DOTALL)


async def test_the_store_examples_run_as_documented(tmp_path: Path) -> None:
    (python,) = _blocks("python")
    (toml,) = _blocks("toml")
    scope: dict[str, Any] = {}
    exec(compile(python, str(DOC), "exec"), scope)  # noqa: S102 - the documentation's own code
    source, mapping = scope["source"], scope["mapping"]
    snapshot = ConfigSnapshot(
        tenant_id="acme", version="v1", sources=(source,), mappings=(mapping,)
    )
    (tmp_path / "acme.json").write_text(json.dumps(dump_snapshot(snapshot)))
    (tmp_path / "jwks.json").write_text(json.dumps(idp().jwks()))
    settings_file = tmp_path / "esra.toml"
    settings_file.write_text(
        f'[[issuers]]\nissuer = "{ISSUER}"\naudience = "{AUDIENCE}"\njwks_file = "jwks.json"\n'
        + toml
    )
    settings = load_settings(settings_file)
    async with bootstrap(settings, purpose=Purpose.STORES) as runtime:
        request = runtime.stores["acme"]
    assert request.source.provider_kind == "postgres-document-store"
    assert "${secret:env:ACME_STORE_PASSWORD}" in request.source.connection_ref
    assert dict(request.options) == {"schema": "acme_store", "text_search_config": "english"}
    assert mapping.schema == "acme_store"
