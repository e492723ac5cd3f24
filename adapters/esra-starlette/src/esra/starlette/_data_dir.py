"""Where the embedded default keeps what outlives a run: the ``esra`` commands' data directory."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["default_data_dir", "prepare_data_dir"]


def default_data_dir() -> Path:
    """Where the embedded default keeps its development key and document store.

    ``$ESRA_HOME`` when set, else ``~/.esra``. Read when a command runs, never at import.
    """
    configured = os.environ.get("ESRA_HOME")
    return Path(configured) if configured else Path.home() / ".esra"


def prepare_data_dir(data_dir: Path) -> None:
    """Create ``data_dir`` owner-only (``0700``) unless it exists.

    A directory that already existed keeps its mode (it is the user's); what ESRA keeps in
    it is protected file by file: its SQLite stores create their databases ``0600``
    (``esra.sqlite._dedicated_connection``), and the keys and the issuer file are written so.

    Raises:
        OSError: the directory cannot be created.
    """
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
