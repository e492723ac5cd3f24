"""The API boundary between distributions: each builds on the others' public modules only.

Every distribution keeps its implementation in private modules (``_name.py``, or a private
package ``_name/``) and names its surface in a few public ones. Two rules follow, both
checked statically over the source trees:

- the public modules of each distribution are exactly the ones listed here, so a module
  made public by accident (a new file without its underscore) fails until it is listed;
- no module imports a private module, or a private name, of another distribution, so the
  adapters and the host build on nothing an embedder could not also build on, and a core
  module can move without breaking them;
- every ESRA class that a public function, method or constructor takes or returns is itself
  public, so an embedder can name in an annotation whatever the surface hands over (a
  structural protocol named with a leading underscore is the one exception: anything with
  its shape will do, so it needs no name).

Run it alone with ``pytest tests/test_api_boundary.py``.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCE_TREES = sorted([ROOT / "packages" / "esra-core" / "src", *(ROOT / "adapters").glob("*/src")])

# What each distribution offers to embedders and to the other distributions.
PUBLIC_MODULES: dict[str, frozenset[str]] = {
    "esra.core": frozenset(
        {
            "esra.core",  # the embedder's surface: Retriever, request/response, config, ports…
            "esra.core.admin",  # administration services a host serves
            "esra.core.audit",  # audit records, sinks, readers and review
            "esra.core.codes",
            "esra.core.config",
            "esra.core.docstore",  # the internal document store's model, services and port
            "esra.core.exceptions",
            "esra.core.fetch",
            "esra.core.hosting",  # what a host composes around the Retriever
            "esra.core.ports",
            "esra.core.prompts",  # what a model adapter reads
            "esra.core.providers",  # what a search-provider adapter executes and returns
            "esra.core.secrets",
            "esra.core.telemetry",
            "esra.core.testing",  # fakes and the contract suites every adapter runs
            "esra.core.testing.audit_contract",
            "esra.core.testing.audit_outbox_contract",
            "esra.core.testing.config_contract",
            "esra.core.testing.contract",
            "esra.core.testing.docstore_audit_contract",
            "esra.core.testing.docstore_claim_fence_contract",
            "esra.core.testing.docstore_configuration_contract",
            "esra.core.testing.docstore_contract",
            "esra.core.testing.docstore_failure_contract",
            "esra.core.testing.docstore_ownership_contract",
            "esra.core.testing.docstore_queue_contract",
            "esra.core.testing.docstore_search_contract",
            "esra.core.testing.leaks",  # the leak scanner a test runs over what ESRA returned
            "esra.core.testing.secret_contract",
            "esra.core.testing.store_state_contract",
        }
    ),
    "esra.sql": frozenset({"esra.sql"}),
    "esra.sqlite": frozenset({"esra.sqlite"}),
    # store_worker stays public while its deprecated `python -m` command is served.
    "esra.postgres": frozenset({"esra.postgres", "esra.postgres.store_worker"}),
    "esra.mysql": frozenset({"esra.mysql"}),
    "esra.sqlserver": frozenset({"esra.sqlserver"}),
    "esra.oracle": frozenset({"esra.oracle"}),
    "esra.redis": frozenset({"esra.redis"}),
    "esra.llm": frozenset({"esra.llm"}),
    "esra.starlette": frozenset({"esra.starlette"}),
}


def _modules(tree: Path) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in tree.rglob("*.py"):
        parts = list(path.relative_to(tree).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _distribution(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _private(dotted: str) -> bool:
    return any(part.startswith("_") and part != "__version__" for part in dotted.split("."))


MODULES = {name: path for tree in SOURCE_TREES for name, path in _modules(tree).items()}


def _crossings(module: str, path: Path) -> Iterator[str]:
    """Each import of another distribution's private module or name, as ``module.name``."""
    own = _distribution(module)
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if name.startswith("esra.") and _distribution(name) != own and _private(name):
                yield name


def test_the_distributions_are_the_listed_ones() -> None:
    """Every source tree holds one listed distribution (a new one must be listed here)."""
    assert {_distribution(module) for module in MODULES} == set(PUBLIC_MODULES)


@pytest.mark.parametrize("distribution", sorted(PUBLIC_MODULES))
def test_only_the_listed_modules_are_public(distribution: str) -> None:
    """A distribution's public modules are exactly its listed surface."""
    public = {
        module
        for module in MODULES
        if _distribution(module) == distribution and not _private(module)
    }
    assert public == PUBLIC_MODULES[distribution]


@pytest.mark.parametrize("distribution", sorted(PUBLIC_MODULES))
def test_no_distribution_imports_another_ones_private_modules(distribution: str) -> None:
    """What an adapter or the host imports from another distribution is public."""
    crossings = sorted(
        f"{module}: {name}"
        for module, path in MODULES.items()
        if _distribution(module) == distribution
        for name in _crossings(module, path)
    )
    assert crossings == []


def test_a_private_import_across_distributions_is_caught(tmp_path: Path) -> None:
    """The check itself: a module importing another distribution's private module fails it."""
    module = tmp_path / "module.py"
    module.write_text(
        "from esra.core._pipeline.scope import admitted_exposure\n"
        "from esra.core.hosting import admitted_exposure as public\n"
        "import esra.sqlite._provider\n"
        "from esra.starlette._cli import main\n",
        encoding="utf-8",
    )
    assert list(_crossings("esra.starlette._tools", module)) == [
        "esra.core._pipeline.scope.admitted_exposure",
        "esra.sqlite._provider",
    ]


def _esra_classes(annotation: object) -> Iterator[type]:
    """The ESRA classes an annotation names, through unions and generics."""
    arguments = typing.get_args(annotation)
    if arguments:
        for argument in arguments:
            yield from _esra_classes(argument)
    elif isinstance(annotation, type) and annotation.__module__.startswith("esra."):
        yield annotation


def _signatures(owner: object) -> Iterator[object]:
    if inspect.isclass(owner):
        yield owner.__init__
        yield from (
            member
            for name, member in vars(owner).items()
            if not name.startswith("_") and callable(member)
        )
    elif callable(owner):
        yield owner


def test_every_class_a_public_signature_names_is_public() -> None:
    """What a public callable takes or returns can be named through a public module."""
    surfaces = [importlib.import_module(m) for ms in PUBLIC_MODULES.values() for m in sorted(ms)]
    exported = {
        id(getattr(surface, name))
        for surface in surfaces
        for name in getattr(surface, "__all__", ())
        if hasattr(surface, name)
    }
    unnamed: set[str] = set()
    for surface in surfaces:
        for name in getattr(surface, "__all__", ()):
            for function in _signatures(getattr(surface, name, None)):
                try:
                    hints = typing.get_type_hints(function)
                except (NameError, TypeError):  # a hint only a type checker resolves
                    continue
                unnamed.update(
                    f"{cls.__module__}.{cls.__qualname__} (in {surface.__name__}.{name})"
                    for hint in hints.values()
                    for cls in _esra_classes(hint)
                    if id(cls) not in exported and not cls.__name__.startswith("_")
                )
    assert sorted(unnamed) == []
