"""No import cycle among the modules of any distribution: checked statically, type-only too.

A cycle hidden behind ``if TYPE_CHECKING:`` still ties the modules together — neither can
move or be read without the other — so every ``import`` and ``from … import`` counts,
wherever it stands in the module. Importing ``a.b.c`` also runs ``a.b``'s ``__init__``, so a
module depends on each package above what it imports. Each distribution's top-level facade
(``esra.core``'s lazy ``__init__``, which names the public surface for type checkers) is left
out: it imports everything by design, and nothing inside its distribution imports it.

Run it alone with ``pytest tests/test_import_cycles.py``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCE_TREES = sorted([ROOT / "packages" / "esra-core" / "src", *(ROOT / "adapters").glob("*/src")])


def _modules(tree: Path) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in tree.rglob("*.py"):
        parts = list(path.relative_to(tree).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _imported(module: str, path: Path) -> Iterator[str]:
    """Every module name ``module`` imports, absolute, before narrowing to known modules."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            yield target
            # ``from a.b import c`` imports the module a.b.c when c is one.
            yield from (f"{target}.{alias.name}" for alias in node.names)


def _graph(modules: dict[str, Path], facade: str) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        edges: set[str] = set()
        for name in _imported(module, path):
            parts = name.split(".")
            # The named module and every package whose __init__ importing it runs.
            edges.update(
                ".".join(parts[:n])
                for n in range(1, len(parts) + 1)
                if ".".join(parts[:n]) in modules
            )
        graph[module] = {
            target
            for target in edges
            # A package's own ancestors run before it; they are not its imports.
            if target not in {module, facade} and not module.startswith(f"{target}.")
        }
    graph[facade] = set()
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))
    return components


def _facade(tree: Path) -> str:
    (namespace,) = (p for p in tree.iterdir() if p.is_dir() and not p.name.endswith(".egg-info"))
    (package,) = (p for p in namespace.iterdir() if (p / "__init__.py").exists())
    return f"{namespace.name}.{package.name}"


@pytest.mark.parametrize("tree", SOURCE_TREES, ids=lambda tree: tree.parent.name)
def test_no_distribution_has_an_import_cycle(tree: Path) -> None:
    modules = _modules(tree)
    cycles = _cycles(_graph(modules, _facade(tree)))
    assert cycles == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_the_check_finds_a_type_only_cycle_through_a_package_init(tmp_path: Path) -> None:
    # a.ports type-imports a.stage.thing; a.stage's __init__ imports a.stage.rules, which
    # imports a.ports: the shape the ports/validation cycle had.
    package = tmp_path / "ns" / "a"
    (package / "stage").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "ports.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ns.a.stage.thing import T\n"
    )
    (package / "stage" / "__init__.py").write_text("from ns.a.stage.rules import R\n")
    (package / "stage" / "rules.py").write_text("from ns.a import ports\nR = 1\n")
    (package / "stage" / "thing.py").write_text("T = 1\n")
    modules = _modules(tmp_path)
    assert _cycles(_graph(modules, "ns.a")) == [["ns.a.ports", "ns.a.stage", "ns.a.stage.rules"]]
