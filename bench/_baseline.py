"""A baseline for a bench run side by side: another revision's packages, served by this code.

``--baseline REV`` in the instruction benches counts a host built from revision ``REV``'s
``packages/*/src`` and ``adapters/*/src`` beside one built from the working tree, in the
same run, on the same inputs, so a change is read as a ratio and never against a figure
from another day. The baseline's sources are exported with ``git archive`` into a temporary
directory and put first on the host process's ``PYTHONPATH``; everything else — the
interpreter, the installed third-party packages, the distributions' metadata and entry
points, the bench itself — is the working tree's. A revision whose entry points,
dependencies or store schemas differ from the working tree's is therefore not a fair
baseline (a host may share the bench's state database with the working tree's).
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["exported", "note_inherited_pythonpath", "serving_environment", "source_path"]

ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def exported(revision: str) -> Iterator[Path]:
    """The tree of ``revision`` (anything ``git archive`` accepts) in a temporary directory.

    Raises:
        RuntimeError: ``revision`` names nothing in this repository.
    """
    archived = subprocess.run(  # noqa: S603 - git with a revision as a single argument
        ["git", "-C", str(ROOT), "archive", "--format=tar", revision],  # noqa: S607
        capture_output=True,
        check=False,
    )
    if archived.returncode != 0:
        detail = archived.stderr.decode(errors="replace").strip()
        msg = f"no baseline revision {revision!r}: {detail}"
        raise RuntimeError(msg)
    with tempfile.TemporaryDirectory(prefix="esra-bench-baseline-") as tmp:
        with tarfile.open(fileobj=io.BytesIO(archived.stdout)) as tar:
            tar.extractall(tmp, filter="data")
        yield Path(tmp)


def source_path(tree: Path) -> str:
    """Every distribution's source directory of ``tree``, as a ``PYTHONPATH`` value."""
    sources = sorted([*tree.glob("packages/*/src"), *tree.glob("adapters/*/src")])
    if not sources:
        msg = f"{tree} holds no packages/*/src or adapters/*/src"
        raise RuntimeError(msg)
    return os.pathsep.join(str(source) for source in sources)


def serving_environment(tree: Path | None) -> dict[str, str]:
    """The environment of a host process serving ``tree``'s code (the working tree's when
    ``None``): this process's, with ``tree``'s sources ahead of anything on ``PYTHONPATH``."""
    environment = dict(os.environ)
    if tree is not None:
        inherited = environment.get("PYTHONPATH")
        ahead = source_path(tree)
        environment["PYTHONPATH"] = f"{ahead}{os.pathsep}{inherited}" if inherited else ahead
    return environment


def note_inherited_pythonpath() -> None:
    """Say so when this process's ``PYTHONPATH`` is set: every host it serves, the working
    tree's included, imports from there first, so the working tree may not be what runs."""
    inherited = os.environ.get("PYTHONPATH")
    if inherited:
        print(f"PYTHONPATH is set: every host imports from it first ({inherited})")
