"""Open a host's parts in-process: the configured host's or the embedded default's.

Both are composed by ``esra.starlette._bootstrap`` and closed on exit; an embedder, a test or
a command (``esra explain``, ``esra ingest``) that needs the parts without an HTTP server
opens them here. They live apart from ``host`` and ``embedded``, which ``bootstrap`` itself
imports, so that no module imports one that imports it back.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from esra.starlette._bootstrap import bootstrap
from esra.starlette._host import HostParts
from esra.starlette._settings import HostSettings

__all__ = ["open_configured", "open_embedded"]


@contextlib.asynccontextmanager
async def open_configured(settings: HostSettings) -> AsyncIterator[HostParts]:
    """The configured host's parts; closed on exit.

    Without ``[fetch] keys_file`` the document-reference keys are generated afresh, so
    references do not survive a restart.
    """
    async with bootstrap(settings) as runtime:
        yield runtime.parts()


@contextlib.asynccontextmanager
async def open_embedded(data_dir: Path) -> AsyncIterator[HostParts]:
    """The embedded default's parts; the demo databases are removed again on exit.

    ``data_dir`` holds what outlives a run: the development key, the document store and
    the state database (configuration, secrets, audit) with its keyring.
    """
    async with bootstrap(data_dir=data_dir) as runtime:
        yield runtime.parts()
