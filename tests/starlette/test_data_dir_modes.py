"""The embedded default's state database is its owner's only, even in a data directory that
already existed with looser permissions (``--data-dir /srv/esra`` made by ``mkdir``).

``state.db`` holds the audit log (who asked what) and the wrapped connection secrets:
readable by any local user, it would bypass the controls ESRA applies to a caller.
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from esra.starlette._cli import main
from esra.starlette._durable_state import STATE_DATABASE_FILE


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_ingest_into_an_existing_open_data_dir_keeps_the_state_database_private(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir = tmp_path / "esra"
    data_dir.mkdir(mode=0o755)
    data_dir.chmod(0o755)
    document = tmp_path / "notes.txt"
    document.write_text("bicycle maintenance notes\n")

    status = main(["ingest", "--no-index", "--data-dir", str(data_dir), str(document)])

    assert status == 0, capsys.readouterr().err
    state = data_dir / STATE_DATABASE_FILE
    assert state.is_file()
    assert _mode(state) & 0o077 == 0, oct(_mode(state))
