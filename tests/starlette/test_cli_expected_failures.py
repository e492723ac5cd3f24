"""Expected failures of the ``esra`` commands are classified messages and an exit status,
never a Python traceback: a URL Python cannot split, a state database that refuses the
connection, a path the command cannot write."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from esra.core.config import ConfigSnapshot, dump_snapshot
from esra.starlette._cli import main
from esra.starlette._settings import SettingsError, load_settings
from tests.starlette._settings_files import write_host_settings
from tests.starlette._tokens import AUDIENCE, ISSUER, idp


def _settings(directory: Path, extra: str) -> Path:
    (directory / "jwks.json").write_text(json.dumps(idp().jwks()))
    empty = ConfigSnapshot(tenant_id="t", version="1")
    (directory / "t.json").write_text(json.dumps(dump_snapshot(empty)))
    path = directory / "esra.toml"
    path.write_text(
        f"""
[[issuers]]
issuer = "{ISSUER}"
audience = "{AUDIENCE}"
jwks_file = "jwks.json"

[[tenants]]
id = "t"
config = "t.json"

{extra}"""
    )
    return path


@pytest.mark.parametrize(
    "url",
    ["http://[::1", "https://[not-an-address]/v1"],
)
def test_a_model_url_python_cannot_split_is_a_settings_error(tmp_path: Path, url: str) -> None:
    """``urlsplit`` raising must name the key, not crash on a variable never assigned."""
    path = _settings(tmp_path, f'[model]\nkind = "openai"\nmodel = "m"\nbase_url = "{url}"\n')

    with pytest.raises(SettingsError, match=r"^model\.base_url: must be an absolute http"):
        load_settings(path, environ={})


def test_migrate_against_a_server_that_refuses_the_connection_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing listens on port 1: one line naming the failure's class, no traceback, and
    never the password the template carried."""
    monkeypatch.setenv("REVIEW2_OWNER_PW", "hunter2-review")
    config = write_host_settings(
        tmp_path,
        tenant="t",
        durable='[state]\ndatabase = "postgresql://esra@127.0.0.1:1/test"\n'
        '[secrets]\nkeyring_file = "kek.json"\n',
    )

    status = main(
        [
            "migrate",
            "--config",
            str(config),
            "--owner-database",
            "postgresql://owner:${secret:env:REVIEW2_OWNER_PW}@127.0.0.1:1/test",
        ]
    )

    assert status == 1
    err = capsys.readouterr().err
    assert err.startswith("esra migrate: ")
    assert "OperationalError" in err
    assert "Traceback" not in err
    assert "hunter2-review" not in err


def test_config_export_from_a_database_path_that_cannot_be_made_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ``--database`` under a regular file cannot be opened: a message, not a traceback."""
    blocker = tmp_path / "file"
    blocker.write_text("")

    status = main(
        [
            "config",
            "export",
            "--tenant",
            "t",
            "--data-dir",
            str(tmp_path / "home"),
            "--database",
            str(blocker / "sub" / "state.db"),
        ]
    )

    assert status == 1
    err = capsys.readouterr().err
    assert err.startswith("esra: config: export: ")
    assert "cannot open the configuration database" in err
