"""Scanner quality: how often the ingest-time injection scanner flags each public collection.

Not a speed benchmark. For every payload file under ``prompt_injection/`` it reports the share
of items (one payload per line, or per JSON entry) with at least one finding; for the benign
controls (ai-seclists' benign lines, garak's normal instructions, BIPIA's carrier e-mails and
every 18F handbook page) the share flagged, which is the false-positive rate; and the findings
on documents that *discuss* prompt injection (OWASP and PayloadsAllTheThings pages), the case
quarantine exists for.

Every item is assigned to a development or a held-out half by a hash of its text, and both
halves are reported: rules are designed by reading misses in the development half only, so a
gap between the halves shows overfitting. Targets (issue 13, item 6) are judged on the whole
set: at least 60 % of ai-seclists prompt-injection and rag-poisoning lines, at most 2 % of
benign lines, no handbook page.

``--against REV`` also runs the scanner as it is at git revision ``REV`` (loaded from
``git show`` into a temporary module, the working tree untouched) in a column beside it.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

from esra.core._docstore.scanner import scan_text

ROOT = Path(
    os.environ.get("ESRA_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data"
)
_SCANNER = "packages/esra-core/src/esra/core/_docstore/scanner.py"

Scan = Callable[[str], Sequence[Any]]


@attrs.frozen
class Family:
    """A named set of items that should (``attack``) or should not (``benign``) be flagged."""

    name: str
    items: tuple[str, ...]
    attack: bool


def held_out(item: str) -> bool:
    """Whether ``item`` belongs to the held-out half (a stable hash of its text)."""
    return hashlib.sha256(item.encode("utf-8", "surrogatepass")).digest()[0] & 1 == 1


def _text_lines(path: Path) -> list[str]:
    return [
        line
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines()
        if line.strip() and not line.startswith("#")
    ]


def _strings(value: Any) -> Iterator[str]:
    """Every string in a JSON document (garak and BIPIA nest payloads in lists and dicts)."""
    if isinstance(value, str):
        if value.strip():
            yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _json_items(path: Path) -> list[str]:
    data = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(data, dict) and "payloads" in data:
        data = data["payloads"]
    return list(_strings(data))


def _ai_seclists(root: Path) -> list[Family]:
    families = []
    for category in sorted(p for p in root.iterdir() if p.is_dir()):
        lines = [line for path in sorted(category.rglob("*.txt")) for line in _text_lines(path)]
        families.append(
            Family(f"ai-seclists/{category.name}", tuple(lines), category.name != "benign")
        )
    return families


def _garak(root: Path) -> list[Family]:
    families = []
    for path in sorted(root.rglob("*")):
        name = f"garak/{path.relative_to(root)}"
        if path.suffix == ".json":
            items = _json_items(path)
        elif path.suffix == ".txt":
            items = _text_lines(path)
        else:
            continue
        families.append(Family(name, tuple(items), path.name != "normal_instructions.json"))
    return families


def _bipia(root: Path) -> list[Family]:
    families = [
        Family(f"bipia/{path.name}", tuple(_json_items(path)), attack=True)
        for path in sorted(root.glob("*_attack_*.json"))
    ]
    # The carrier e-mails BIPIA injects into, as written: ordinary mail, so benign.
    emails = [
        str(json.loads(line)["context"])
        for line in (root / "email" / "test.jsonl").read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    families.append(Family("bipia/email carriers", tuple(emails), attack=False))
    return families


def families(root: Path) -> list[Family]:
    """Every collection the bench measures, attacks first within each corpus."""
    injection = root / "prompt_injection"
    handbook = sorted((root / "documents" / "markdown_policies_18F_handbook").rglob("*.md"))
    pages = tuple(p.read_text(encoding="utf-8") for p in handbook)
    return [
        *_ai_seclists(injection / "ai-seclists"),
        *_garak(injection / "garak"),
        *_bipia(injection / "bipia"),
        Family("18F handbook pages", pages, attack=False),
    ]


def load_scanner(revision: str) -> Scan:
    """Return ``scan_text`` from the scanner at git ``revision``, without touching the tree."""
    repo = Path(__file__).resolve().parents[1]
    source = subprocess.run(  # noqa: S603 - fixed arguments; the revision is the caller's
        ["git", "show", f"{revision}:{_SCANNER}"],  # noqa: S607 - git from PATH
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as handle:
        handle.write(source)
    spec = importlib.util.spec_from_file_location(f"_scanner_at_{revision}", handle.name)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # attrs resolves the module's annotations through sys.modules while building the class.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    os.unlink(handle.name)
    scan: Scan = module.scan_text
    return scan


def _rate(scan: Scan, items: Sequence[str]) -> tuple[int, int]:
    return sum(1 for item in items if scan(item)), len(items)


def _cell(flagged: int, total: int) -> str:
    return f"{flagged:>5}/{total:<5} {flagged / total:6.1%}" if total else f"{'-':>19}"


def report(scanners: dict[str, Scan], measured: list[Family]) -> None:
    """Print, per family, the flagged share for each scanner: all items, dev half, held out."""
    header = f"  {'family':<52} {'kind':<6}"
    for label in scanners:
        header += f" | {label + ' all':>19} {'dev':>19} {'held-out':>19}"
    print(header)
    for family in measured:
        if not family.items:
            continue
        row = f"  {family.name:<52} {'attack' if family.attack else 'benign':<6}"
        dev = [item for item in family.items if not held_out(item)]
        rest = [item for item in family.items if held_out(item)]
        for scan in scanners.values():
            row += " | " + " ".join(_cell(*_rate(scan, part)) for part in (family.items, dev, rest))
        print(row)


def discussions(scan: Scan, root: Path) -> None:
    """Findings on the pages that discuss prompt injection (quarantine is expected there)."""
    folder = root / "prompt_injection" / "benign_about_prompt_injection"
    for path in sorted(folder.glob("*.md")):
        findings = scan(path.read_text(encoding="utf-8", errors="replace"))
        rules = sorted({f.rule for f in findings})
        print(f"  about PI: {path.name:<48} {len(findings):>3} findings {rules}")


def main(argv: Sequence[str] | None = None) -> None:
    """Print detection and false-positive rates."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", metavar="REV", help="also measure the scanner at REV")
    # Accepted so ``nox -s bench -- --quick`` runs every script; the corpus is small enough
    # to be measured whole either way.
    parser.add_argument(
        "--quick", action="store_true", help="no effect: the whole corpus is measured"
    )
    args = parser.parse_args(argv)
    if not (ROOT / "prompt_injection" / "ai-seclists").is_dir():
        print(f"scanner_quality: shared data not found under {ROOT}; skipped")
        return
    scanners: dict[str, Scan] = {"now": scan_text}
    if args.against:
        scanners[args.against] = load_scanner(args.against)
    print("scanner_quality: share of items with at least one finding")
    report(scanners, families(ROOT))
    discussions(scan_text, ROOT)


if __name__ == "__main__":
    main()
