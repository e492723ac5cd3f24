"""Where the embedded default keeps what outlives a run: the ``esra`` commands' data directory."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["default_data_dir", "prepare_data_dir"]

# The embedded default's state database (``_durable_state.STATE_DATABASE_FILE``, named here
# because that module's users import this one). The document store's file is not made here:
# that it is absent until the store is initialised is how a fresh store reads as Disabled.
_DATABASE_FILES = ("state.db",)


def default_data_dir() -> Path:
    """Where the embedded default keeps its development key and document store.

    ``$ESRA_HOME`` when set, else ``~/.esra``. Read when a command runs, never at import.
    """
    configured = os.environ.get("ESRA_HOME")
    return Path(configured) if configured else Path.home() / ".esra"


def prepare_data_dir(data_dir: Path) -> None:
    """Create ``data_dir`` (owner only) and its state database, readable by its owner only.

    A directory made here is ``0700``, but one that already existed keeps its mode (it is
    the user's): the audit log (who asked what) and the wrapped secrets would then be as
    readable as SQLite's default ``0644`` makes them. So the database is created empty and
    ``0600`` before SQLite opens it; SQLite gives its journal and WAL files the database's
    mode. A database that already exists is left as it is.

    Raises:
        OSError: the directory or a database cannot be created.
    """
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    for name in _DATABASE_FILES:
        try:
            descriptor = os.open(data_dir / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue
        os.close(descriptor)
