"""Where the embedded default keeps what outlives a run: the ``esra`` commands' data directory."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["default_data_dir"]


def default_data_dir() -> Path:
    """Where the embedded default keeps its development key and document store.

    ``$ESRA_HOME`` when set, else ``~/.esra``. Read when a command runs, never at import.
    """
    configured = os.environ.get("ESRA_HOME")
    return Path(configured) if configured else Path.home() / ".esra"
