"""``esra config import --publish`` refuses a mapping naming what its engine cannot hold."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest

from esra.core._admin.roles import Role
from esra.core.config import dump_snapshot
from esra.core.testing.config_contract import contract_snapshot
from esra.starlette._cli import main
from esra.starlette._embedded import EMBEDDED_TENANT
from tests.starlette.test_config_cli import _seed_secret, _token

HOSTILE = 'hr" "x'


def _oracle_document(tmp_path: Path, relation: str) -> Path:
    snapshot = contract_snapshot(EMBEDDED_TENANT)
    sources = tuple(attrs.evolve(s, provider_kind="oracle") for s in snapshot.sources)
    mappings = tuple(attrs.evolve(m, relation=relation) for m in snapshot.mappings)
    document = dump_snapshot(attrs.evolve(snapshot, sources=sources, mappings=mappings))
    path = tmp_path / "oracle.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def _import(tmp_path: Path, data_dir: Path, relation: str) -> int:
    args = ["config", "import", str(_oracle_document(tmp_path, relation))]
    args += ["--data-dir", str(data_dir), "--publish"]
    for role in (Role.ESRA_DATA_MANAGE, Role.GOVERNANCE_MANAGE, Role.ESRA_EXPOSURE_MANAGE):
        args += ["--token", _token(data_dir, role, subject=role.value.lower())]
    return main(args)


def test_import_refuses_to_publish_an_oracle_name_with_a_double_quote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir = tmp_path / "home"
    _seed_secret(data_dir)
    assert _import(tmp_path, data_dir, HOSTILE) != 0
    captured = capsys.readouterr()
    assert "cannot hold" in captured.err
    assert HOSTILE not in captured.err + captured.out
    assert "published" not in captured.out
    out = tmp_path / "export.json"
    exported = ["config", "export", "--tenant", EMBEDDED_TENANT, "--data-dir", str(data_dir)]
    assert main([*exported, "--output", str(out)]) != 0 or not any(
        e.get("published") for e in json.loads(out.read_text(encoding="utf-8"))["exposures"]
    )


def test_import_publishes_an_oracle_name_oracle_can_hold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir = tmp_path / "home"
    _seed_secret(data_dir)
    assert _import(tmp_path, data_dir, "HR.EMPLOYEES x") == 0
    assert "published" in capsys.readouterr().out
