"""Run questions through the whole pipeline over the demo and print what a caller gets back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO

from esra.core import RetrievalResponse, Retriever
from esra.core.exceptions import EsraError
from esra.starlette._demo.config import demo_context

__all__ = ["EXAMPLE_QUESTIONS", "format_response", "run_demo"]

EXAMPLE_QUESTIONS = (
    "My e-bike battery is not charging and the charger blinks red",
    "How many days of paid time off do employees get?",
    "Which gravel bike has room for wide tyres and bikepacking racks?",
    "Can I get a refund for a helmet that arrived damaged?",
    "Why do my disc brakes squeal when it rains?",
)


def format_response(question: str, response: RetrievalResponse) -> str:
    """Render one response the way the demo prints it."""
    lines = [f"Q: {question}", f"   status: {response.status.value}"]
    if not response.results:
        lines.append("   (no results)")
    for rank, item in enumerate(response.results, start=1):
        lines.append(f"   {rank}. {item.title}  [{item.source}]  score {item.score:.3f}")
        lines.append(f"      {item.fragment}")
        extra = ", ".join(f"{k}={v}" for k, v in sorted(item.fields.items()))
        if extra:
            lines.append(f"      {extra}")
    lines.extend(f"   warning {w.code.value}: {w.message}" for w in response.warnings)
    return "\n".join(lines)


async def run_demo(questions: Sequence[str], *, regions: tuple[str, ...], out: TextIO) -> int:
    """Build the demo in a temporary directory and answer each question; return exit status.

    The process is composed by ``esra.starlette._bootstrap`` like every other command: the
    demo's providers come from the provider registry and its searches run through the
    runtime's one executor.
    """
    from esra.starlette._bootstrap import Purpose, bootstrap  # noqa: PLC0415 - loads the registry

    status = 0
    async with bootstrap(purpose=Purpose.DEMO) as runtime:
        (snapshot,) = runtime.snapshots
        retriever = Retriever(
            config=runtime.config,
            providers=runtime.providers.tenant(snapshot.tenant_id),
            model=runtime.language_model(),
            audit=runtime.audit,
            clock=runtime.clock,
            executor=runtime.executor,
            tenant_id=snapshot.tenant_id,  # these providers hold this tenant's data only
        )
        for number, question in enumerate(questions, start=1):
            context = demo_context(f"demo-{number}", regions=regions)
            try:
                response = await retriever.retrieve(context, question)
            except EsraError as exc:
                out.write(f"Q: {question}\n   error {exc.code.value}: {exc}\n\n")
                status = 1
                continue
            out.write(format_response(question, response) + "\n\n")
    return status
