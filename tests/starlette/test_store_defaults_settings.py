"""``[store]``: the settings of every tenant's document store until an operator configures its
own, validated with errors naming the key."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from esra.core._docstore.scanner import ScanPolicy
from esra.core._docstore.store_configuration import ConfigurableSettings
from esra.core.config import dump_snapshot
from esra.starlette._demo.config import demo_snapshot
from esra.starlette._settings import HostSettings, SettingsError, load_settings
from tests.starlette._tokens import AUDIENCE, ISSUER, idp

BASE = f"""
[[issuers]]
issuer = "{ISSUER}"
audience = "{AUDIENCE}"
jwks_file = "jwks.json"

[[tenants]]
id = "larkspur"
config = "larkspur.json"
databases = "."
"""


def _load(directory: Path, extra: str) -> HostSettings:
    (directory / "jwks.json").write_text(json.dumps(idp().jwks()))
    snapshot = demo_snapshot()
    (directory / "larkspur.json").write_text(json.dumps(dump_snapshot(snapshot)))
    for source in snapshot.sources:
        (directory / source.connection_ref).touch()
    path = directory / "esra.toml"
    path.write_text(BASE + extra)
    return load_settings(path, model_key=False)


def test_the_documented_store_table_loads_as_written(tmp_path: Path) -> None:
    """docs/host.md's ``[store]`` example is accepted and means the library's defaults."""
    text = (Path(__file__).parents[2] / "docs" / "host.md").read_text(encoding="utf-8")
    section = text[text.index("### Store settings: `[store]`") :]
    (block,) = re.findall(r"```toml\n(.*?)```", section[: section.index("\n### ", 5)], re.S)
    assert _load(tmp_path, "\n" + block).store == ConfigurableSettings()


def test_without_a_store_table_the_defaults_are_the_libraries(tmp_path: Path) -> None:
    """No ``[store]``: quarantine, keep bytes, three attempts, twenty per turn."""
    assert _load(tmp_path, "").store == ConfigurableSettings()


def test_the_store_table_sets_every_tenants_defaults(tmp_path: Path) -> None:
    """Each key replaces its default; the others keep theirs."""
    settings = _load(tmp_path, '\n[store]\nscan_policy = "reject"\nretain_bytes = false\n')
    assert settings.store == ConfigurableSettings(scan_policy=ScanPolicy.REJECT, retain_bytes=False)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ('scan_policy = "delete"', "store.scan_policy: must be one of"),
        ("retain_bytes = 1", "store.retain_bytes: must be true or false"),
        ("max_attempts = 0", "store.max_attempts: must be a whole number from 1 to 100"),
        ("max_attempts = 2.5", "store.max_attempts"),
        ("batch_per_tenant = 100000", "store.batch_per_tenant: must be a whole number"),
        ("lease_s = 10", "store.lease_s"),
    ],
)
def test_a_bad_store_setting_names_its_key(tmp_path: Path, extra: str, message: str) -> None:
    """Every refusal names ``store.<key>``; an unknown key is refused, not ignored."""
    with pytest.raises(SettingsError) as refused:
        _load(tmp_path, f"\n[store]\n{extra}\n")
    assert message in str(refused.value)
