"""The embedded default's databases are their owner's only, even in a data directory that
already existed with looser permissions (``--data-dir /srv/esra`` made by ``mkdir``).

``state.db`` holds the audit log (who asked what) and the wrapped connection secrets, and
``document-store.db`` every uploaded document: readable by any local user, they would
bypass the controls ESRA applies to a caller.
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
    databases = sorted(data_dir.glob("*.db*"))
    assert any(path.name.startswith("document-store.db") for path in databases), databases
    for path in databases:  # the -wal and -shm files included
        assert _mode(path) & 0o077 == 0, (path.name, oct(_mode(path)))
