"""The ``esra`` command line. ``esra demo [QUESTION ...]`` runs the embedded demo."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="esra", description="ESRA: governed enterprise search for AI clients."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo",
        help="search the embedded Larkspur Cycles demo (SQLite, offline model, no server)",
        description="Run questions through the whole ESRA pipeline over a small fictional "
        "company. Without a question, runs a few examples.",
    )
    demo.add_argument("question", nargs="*", help="the question to ask (words are joined)")
    demo.add_argument(
        "--region",
        action="append",
        default=None,
        help="the caller's region claim for support tickets (repeatable; default: emea)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit status."""
    args = _parser().parse_args(argv)
    if args.command == "demo":
        from esra.starlette.demo.run import EXAMPLE_QUESTIONS, run_demo  # noqa: PLC0415

        question = " ".join(args.question).strip()
        questions = [question] if question else list(EXAMPLE_QUESTIONS)
        regions = tuple(args.region or ("emea",))
        return asyncio.run(run_demo(questions, regions=regions, out=sys.stdout))
    return 2  # pragma: no cover - argparse rejects unknown commands first


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
