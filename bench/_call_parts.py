"""Stand-ins for parts of ESRA's tool call, for ``bench/host_instructions.py --breakdown``.

What a part of the call costs is the server's count with the part less its count with the
part's stand-in: each stand-in does nearly nothing, but keeps every answer valid (the bench
checks each response), so the rest of the call runs exactly as deployed. Installed in the
serving process before ``esra serve`` starts, by name:

- ``model``: the LocalModel's reasoning. A rerank answers the prompt's result ids in the
  order given; any other task answers what the real model answered the first time it was
  asked the same (task, request, reference tags). Prompt building, the core's parsing of the
  answer and everything else stay.
- ``sql``: the statements: a statement the engine ran once answers its remembered rows at
  once (SQLite: also without its worker-thread hop; PostgreSQL: without the pool, the
  pipeline and the round trip). Statement building and row mapping stay.
- ``audit-writes``: the durable audit's commits (the SQLite file's or PostgreSQL's): a
  batch is taken and dropped. The records are still made, queued and waited for.
- ``pipeline``: the whole retrieve: the first response is remembered and returned again.
  What stays is the host around it: HTTP, the MCP SDK, authentication, tool lookup, the
  ``esra.invoke`` audit record and the response's serialization.

Bench-only: these replace private functions of the installed distributions and must never
run in a served host.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

STAND_INS: dict[str, str] = {
    "model": "the LocalModel's reasoning (selection, planning, rerank)",
    "sql": "the statements (and, on SQLite, their thread hops)",
    "audit-writes": "the durable audit's commits",
    "pipeline": "the whole retrieve (stages, model, SQL, audit)",
}


def install(part: str, engine: str = "sqlite") -> None:
    """Replace ``part`` (a key of ``STAND_INS``) by its stand-in in this process; ``engine``
    (``sqlite`` or ``postgres``) is the one the host's source and audit log run on."""
    installers: dict[str, Callable[[], None]] = {
        "model": _remembered_model,
        "sql": lambda: _remembered_rows(_engine_parts(engine)[0]),
        "audit-writes": lambda: _dropped_audit_batches(_engine_parts(engine)[1]),
        "pipeline": _remembered_response,
    }
    installers[part]()


def _engine_parts(engine: str) -> tuple[Any, Any]:
    """The engine's statement runner class and audit log class (imported only when asked)."""
    if engine == "sqlite":
        from esra.sqlite import SqliteAuditLog, _provider  # noqa: PLC0415

        return _provider._SqliteEngine, SqliteAuditLog
    from esra.postgres import PostgresAuditLog  # noqa: PLC0415
    from esra.postgres import _provider as postgres_provider  # noqa: PLC0415

    return postgres_provider._PostgresEngine, PostgresAuditLog


def print_breakdown(
    deployed: float, without: Mapping[str, float], *, bare: float | None = None
) -> None:
    """Print what each part costs: ``deployed`` (million instructions per call) less the
    count ``without`` it (by stand-in name; every one of ``STAND_INS``), the pipeline's own
    work (the retrieve less the three named parts) and the host around it."""
    print(f"ESRA as deployed: {deployed:.2f} M/call")
    print(f"{'part replaced by a stand-in':<62} {'M/call':>7} {'part M':>7} {'share':>6}")

    def row(label: str, per_call: str, cost: float, note: str = "") -> None:
        print(f"{label:<62} {per_call:>7} {cost:>7.2f} {cost / deployed:>6.0%}{note}")

    cost = {part: deployed - count for part, count in without.items()}
    for part, description in STAND_INS.items():
        row(f"{part}: {description}", f"{without[part]:.2f}", cost[part])
    named = cost["model"] + cost["sql"] + cost["audit-writes"]
    row("the pipeline's own work (pipeline less the three above)", "", cost["pipeline"] - named)
    note = f"  (bare route: {bare:.2f})" if bare is not None else ""
    row("the host around it (as deployed less pipeline)", "", deployed - cost["pipeline"], note)
    if bare is not None:
        free = (deployed - cost["model"] - cost["sql"]) / bare
        print(f"ESRA with a free model and free SQL / bare route: {free:.1f}x")


def _remembered_model() -> None:
    from esra.core.prompts import Prompt, PromptTask  # noqa: PLC0415
    from esra.llm import LocalModel  # noqa: PLC0415
    from esra.llm._reference import items, string  # noqa: PLC0415

    answer = LocalModel.answer
    answers: dict[tuple[PromptTask, str, tuple[str, ...]], str] = {}

    def remembered(self: LocalModel, prompt: Prompt) -> str:
        if prompt.task is PromptTask.RERANK:
            ids = [string(obj, "id") for _, obj in items(prompt)]
            scores = [{"id": rid, "score": 1.0 / (1 + n)} for n, rid in enumerate(ids)]
            return json.dumps({"scores": scores})
        key = (prompt.task, prompt.request, tuple(item.tag for item in prompt.reference))
        if key not in answers:
            answers[key] = answer(self, prompt)
        return answers[key]

    LocalModel.answer = remembered  # type: ignore[method-assign]


def _remembered_rows(runner: Any) -> None:
    """``runner.run`` (an engine's statement runner) answers a statement it ran once from memory."""
    run = runner.run
    remembered: dict[tuple[str, str], list[Any]] = {}

    async def from_memory(self: Any, built: Any, query: Any, budget: Any) -> list[Any]:
        key = (built.sql, repr(sorted(built.params.items())))
        if key not in remembered:
            remembered[key] = await run(self, built, query, budget)
        return list(remembered[key])

    runner.run = from_memory


def _dropped_audit_batches(audit_log: Any) -> None:
    """``audit_log.write_batch`` takes a batch and drops it."""

    async def dropped(self: Any, records: Sequence[Any]) -> None:
        del self, records

    audit_log.write_batch = dropped


def _remembered_response() -> None:
    from esra.core import InvocationContext, RetrievalRequest, RetrievalResponse, Retriever  # noqa: PLC0415

    retrieve = Retriever.retrieve
    remembered: list[RetrievalResponse] = []

    async def first_response(
        self: Retriever, ctx: InvocationContext, request: RetrievalRequest | str, **kwargs: Any
    ) -> RetrievalResponse:
        if not remembered:
            remembered.append(await retrieve(self, ctx, request, **kwargs))
        return remembered[0]

    Retriever.retrieve = first_response  # type: ignore[method-assign]
