"""Scanner quality: how often the ingest-time injection scanner flags each public collection.

Not a speed benchmark: it reports detection rates per ai-seclists category (one payload per
line), the false-positive rate on the benign control lines and on the 18F handbook's real
policy pages, and the findings on documents that *discuss* prompt injection (OWASP and
PayloadsAllTheThings pages) — the case quarantine exists for.
"""

from __future__ import annotations

import os
from pathlib import Path

from esra.core.docstore.scanner import scan_text

ROOT = Path(
    os.environ.get("ESRA_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data"
)


def _lines(folder: Path) -> list[str]:
    return [
        line
        for path in sorted(folder.glob("*.txt"))
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines()
        if line.strip() and not line.startswith("#")
    ]


def main() -> None:
    """Print detection and false-positive rates."""
    seclists = ROOT / "prompt_injection" / "ai-seclists"
    if not seclists.is_dir():
        print(f"scanner_quality: shared data not found under {ROOT}; skipped")
        return
    print("scanner_quality: share of items with at least one finding")
    for category in sorted(p.name for p in seclists.iterdir() if p.is_dir()):
        lines = _lines(seclists / category)
        if lines:
            flagged = sum(1 for line in lines if scan_text(line))
            share = flagged / len(lines)
            print(f"  ai-seclists/{category:<20} {flagged:>5}/{len(lines):<5} {share:6.1%}")
    pages = sorted((ROOT / "documents" / "markdown_policies_18F_handbook").rglob("*.md"))
    flagged_pages = sum(1 for p in pages if scan_text(p.read_text(encoding="utf-8")))
    print(f"  18F handbook pages (benign)        {flagged_pages:>5}/{len(pages):<5}")
    for path in sorted((ROOT / "prompt_injection" / "benign_about_prompt_injection").glob("*.md")):
        findings = scan_text(path.read_text(encoding="utf-8", errors="replace"))
        rules = sorted({f.rule for f in findings})
        print(f"  about PI: {path.name:<48} {len(findings):>3} findings {rules}")


if __name__ == "__main__":
    main()
