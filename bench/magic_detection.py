"""Magic-byte detection: the store's hand-rolled header sniffer against puremagic.

Not a speed benchmark first. Over every file under ``$ESRA_SHARED_DATA/documents`` it
decides what kind each file is, the way ``inspect_upload`` needs it (PDF, zip, OLE compound
file, text, non-UTF-8 text, binary), with three detectors:

1. ``hand-rolled``: ``esra.core._docstore.formats.sniff_header``, what the store uses;
2. ``puremagic+text``: puremagic behind the existing rules: its best-ranked candidate that
   names a PDF, a zip or an OLE compound file decides, and the hand-rolled text tests
   decide the rest (puremagic has no signature for plain text);
3. ``puremagic``: puremagic alone, its best-ranked candidate mapped the same way, and a file
   it cannot identify, or identifies as anything else, counted as binary.

The true kind comes from the extension, except for the files listed in ``KNOWN`` whose
extension is known to be wrong (encrypted OOXML is an OLE container; some qpdf fixtures are
fragments with no PDF header at all). Per extension it prints how many files each detector
classifies as their true kind, then every file where a detector misses or where the two
puremagic variants and the hand-rolled detector disagree, and the CPU time per file (best
of three runs over the corpus). Neither detector is ever given the file name: the type must
come from the bytes.

A missing corpus or a missing ``puremagic`` is reported and the script exits 0.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from esra.core._docstore.formats import HEADER_BYTES, HeaderKind, sniff_header

ROOT = Path(
    os.environ.get("ESRA_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data"
)

PDF, ZIP, OLE, TEXT = HeaderKind.PDF, HeaderKind.ZIP, HeaderKind.OLE, HeaderKind.TEXT
# What each extension in the corpus is, by construction. Non-UTF-8 text counts as text: the
# UTF-8 rule is the store's, not a magic-byte question.
BY_EXTENSION: dict[str, HeaderKind] = {
    ".pdf": PDF,
    **dict.fromkeys((".docx", ".docm", ".dotm", ".xlsx", ".ooxml", ".odt", ".zip"), ZIP),
    **dict.fromkeys((".doc", ".dot"), OLE),
    **dict.fromkeys((".md", ".txt", ".csv", ".xml", ".xsl", ".xsd", ".json", ".rtf", ""), TEXT),
}
_OLE_DOCX = "encrypted OOXML: an OLE container holding EncryptedPackage"
_FRAGMENT = "qpdf fixture with no %PDF- header anywhere: a fragment, not a PDF"
KNOWN: dict[str, tuple[HeaderKind, str]] = {
    "office_apache_poi/document_bug53475-password-is-pass.docx": (OLE, _OLE_DOCX),
    "office_apache_poi/document_bug53475-password-is-solrcell.docx": (OLE, _OLE_DOCX),
    "office_apache_poi/poifs_protected_agile.docx": (OLE, _OLE_DOCX),
    "office_oletools/basic_encrypted.docx": (OLE, _OLE_DOCX),
    "office_oletools/encrypted_encrypted.docx": (OLE, _OLE_DOCX),
    "office_oletools/encrypted_encrypted.docm": (OLE, _OLE_DOCX),
    "office_apache_poi/"
    "document_cpansearch.perl.org_src_tobyink_acme-rundoc-0.001_word-lib_hello_world.docm": (
        OLE,
        "a Word 97 binary document named .docm",
    ),
    **{
        f"pdf/malformed/qpdf/{name}": (HeaderKind.BINARY, _FRAGMENT)
        for name in (
            "bad1.pdf",
            "bad-direct-root.pdf",
            "fuzz-16214.pdf",
            "issue-141a.pdf",
            "issue-143.pdf",
            "issue-147.pdf",
            "issue-148.pdf",
            "issue-150.pdf",
            "issue-335b.pdf",
        )
    },
}
# Text and binary are one verdict for a PDF fragment: "not a PDF" is what must be decided.
_NOT_CONTAINER = frozenset({TEXT, HeaderKind.NON_UTF8_TEXT, HeaderKind.BINARY})

Detector = Callable[[bytes], HeaderKind]


def true_kind(relative: str) -> HeaderKind:
    """The file's kind: from ``KNOWN``, else from its extension."""
    if relative in KNOWN:
        return KNOWN[relative][0]
    return BY_EXTENSION.get(Path(relative).suffix.lower(), TEXT)


def agrees(detected: HeaderKind, truth: HeaderKind) -> bool:
    """Whether ``detected`` leads to the decision ``truth`` needs."""
    if truth is TEXT:
        return detected in (TEXT, HeaderKind.NON_UTF8_TEXT)
    if truth is HeaderKind.BINARY:
        return detected in _NOT_CONTAINER
    return detected is truth


def _puremagic_kind(data: bytes) -> HeaderKind | None:
    """The container kind of puremagic's best-ranked candidate that names one, if any."""
    # Imported by name: only the bench session installs it, so mypy does not need it.
    puremagic: Any = importlib.import_module("puremagic")

    try:
        candidates = puremagic.magic_string(data)
    except puremagic.PureError:
        return None
    for candidate in candidates:  # best first
        mime, match = candidate.mime_type, candidate.byte_match
        if match.startswith(b"%PDF") or mime == "application/pdf":
            return PDF
        if match.startswith(b"\xd0\xcf\x11\xe0") or mime in ("application/msword",):
            return OLE
        if match.startswith(b"PK") or "zip" in mime or "openxmlformats" in mime:
            return ZIP
    return None


def puremagic_with_text(data: bytes) -> HeaderKind:
    """puremagic for the containers, the hand-rolled text tests for everything else."""
    kind = _puremagic_kind(data)
    if kind is not None:
        return kind
    fallback = sniff_header(data)
    return HeaderKind.BINARY if fallback in (PDF, ZIP, OLE) else fallback


def puremagic_alone(data: bytes) -> HeaderKind:
    """puremagic only: what it cannot name as a container is binary."""
    return _puremagic_kind(data) or HeaderKind.BINARY


def corpus(root: Path) -> list[tuple[str, bytes]]:
    """Every file under ``root`` with its path relative to it, sorted."""
    files = sorted(p for p in root.rglob("*") if p.is_file())
    return [(str(p.relative_to(root)), p.read_bytes()) for p in files]


def _group(relative: str) -> str:
    return Path(relative).suffix.lower() or "(none)"


def _top_candidate(data: bytes) -> str:
    # Imported by name: only the bench session installs it, so mypy does not need it.
    puremagic: Any = importlib.import_module("puremagic")

    try:
        return puremagic.magic_string(data)[0].extension or "(no extension)"
    except puremagic.PureError:
        return "(none)"


def report(files: list[tuple[str, bytes]], detectors: dict[str, Detector], listed: int) -> None:
    """Per extension: files each detector classifies as their true kind; then the misses and
    disagreements of the first ``listed`` detectors, file by file."""
    verdicts = {name: [detect(data) for _, data in files] for name, detect in detectors.items()}
    totals: dict[str, Counter[str]] = defaultdict(Counter)
    counts: Counter[str] = Counter()
    for index, (relative, _) in enumerate(files):
        group = _group(relative)
        counts[group] += 1
        for name in detectors:
            totals[name][group] += agrees(verdicts[name][index], true_kind(relative))
    names = list(detectors)
    print(f"  {'extension':<10} {'files':>5} " + " ".join(f"{n:>15}" for n in names))
    for group, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        print(f"  {group:<10} {count:>5} " + " ".join(f"{totals[n][group]:>15}" for n in names))
    total = sum(counts.values())
    print(f"  {'all':<10} {total:>5} " + " ".join(f"{sum(totals[n].values()):>15}" for n in names))
    shown = names[:listed]
    print(f"  misses and disagreements of {', '.join(shown)} (file  true kind: verdicts):")
    for index, (relative, data) in enumerate(files):
        truth = true_kind(relative)
        seen = [verdicts[name][index] for name in shown]
        if all(agrees(kind, truth) for kind in seen) and len(set(seen)) == 1:
            continue
        marks = ", ".join(f"{k}{'' if agrees(k, truth) else ' (miss)'}" for k in seen)
        note = f"  [{KNOWN[relative][1]}]" if relative in KNOWN else ""
        print(f"    {relative}  {truth}: {marks}; puremagic top: {_top_candidate(data)}{note}")
    print("  puremagic's top-ranked candidate, by true kind:")
    tops: dict[HeaderKind, Counter[str]] = defaultdict(Counter)
    for relative, data in files:
        tops[true_kind(relative)][_top_candidate(data)] += 1
    for kind, top in sorted(tops.items()):
        print(f"    {kind}: " + ", ".join(f"{ext} {n}" for ext, n in top.most_common(6)))


def timing(files: list[tuple[str, bytes]], detectors: dict[str, Detector]) -> None:
    """CPU time per file, best of three runs over the corpus, and the ratio to hand-rolled."""
    best: dict[str, float] = {}
    for name, detect in detectors.items():
        runs = []
        for _ in range(3):
            start = time.process_time()
            for _, data in files:
                detect(data)
            runs.append(time.process_time() - start)
        best[name] = min(runs) / len(files)
    baseline = best["hand-rolled"]
    for name, seconds in best.items():
        print(f"  {name:<15} {seconds * 1e6:>9.1f} µs/file  {seconds / baseline:>6.1f}x")


def main(argv: Sequence[str] | None = None) -> None:
    """Print per-extension agreement, the misses, and the cost per file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # Accepted so ``nox -s bench -- --quick`` runs every script; the corpus is measured whole.
    parser.add_argument(
        "--quick", action="store_true", help="no effect: the whole corpus is measured"
    )
    parser.parse_args(argv)
    root = ROOT / "documents"
    if not root.is_dir():
        print(f"magic_detection: shared data not found under {root}; skipped")
        return
    if importlib.util.find_spec("puremagic") is None:
        print("magic_detection: puremagic is not installed; skipped")
        return
    files = corpus(root)
    detectors: dict[str, Detector] = {
        "hand-rolled": sniff_header,
        "puremagic+text": puremagic_with_text,
        "puremagic": puremagic_alone,
    }
    print(
        f"magic_detection: {len(files)} files, files classified as their true kind "
        f"(hand-rolled reads the first {HEADER_BYTES} bytes)"
    )
    report(files, detectors, listed=2)
    print("magic_detection: CPU time per file")
    timing(files, detectors)


if __name__ == "__main__":
    main()
