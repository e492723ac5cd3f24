"""Where the externally authored test data lives, and what to do when it is absent.

The data is read in place from ``ESRA_SHARED_DATA`` (default: ``../shared/data`` beside the
repository) and never copied into the project. Tests that need it carry the
``external_data`` marker; they skip when it is absent, except under ``CI=true``, where its
absence is a failure.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

__all__ = ["load_sqli_payloads", "shared_data"]

_REPO = Path(__file__).resolve().parents[1]
SQLI_PAYLOADS = "sqli/_combined_unique_payloads.txt"


def shared_data(relative: str) -> Path:
    """Return ``relative`` under the shared data folder; skip (or fail under CI) if absent."""
    root = Path(os.environ.get("ESRA_SHARED_DATA") or _REPO.parent / "shared" / "data")
    path = root / relative
    if not path.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"external data missing under CI: {path}")
        pytest.skip(f"external data not present: {path}")
    return path


def load_sqli_payloads() -> list[str]:
    """Every non-empty line of the combined SQL-injection payload list.

    Read as bytes and decoded with ``errors="surrogateescape"``: undecodable lines are kept,
    as strings with lone surrogates, because hostile input arrives that way too.
    """
    lines = shared_data(SQLI_PAYLOADS).read_bytes().split(b"\n")
    return [line.decode("utf-8", errors="surrogateescape") for line in lines if line.strip()]
