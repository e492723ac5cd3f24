"""Every model call as a GenAI ``chat`` span, its token usage on it.

The ``Retriever`` wraps its ``LanguageModel`` in ``TracedLanguageModel``: each ``complete``
is a CLIENT span ``chat`` (``gen_ai.operation.name = chat``) naming the task the prompt is
for (``esra.prompt.task``: select sources, plan, rerank, answer) and the tenant of the stage
that called it. A remote client's reported usage lands on that span as
``gen_ai.usage.input_tokens`` / ``gen_ai.usage.output_tokens`` (``report_model_usage``).
Never the prompt or the answer: the span says that a call happened, for what, how long it
took and how it failed (``error.type``).
"""

from __future__ import annotations

from opentelemetry.trace import SpanKind, StatusCode

from esra.core._prompts.model import Prompt
from esra.core._telemetry import (
    TENANT_ID,
    current_span_tenant,
    error_type,
    inert_span,
    tracer,
)
from esra.core.ports import LanguageModel

__all__ = ["TracedLanguageModel"]


class TracedLanguageModel:
    """A ``LanguageModel`` whose every call is a ``chat`` span; answers pass through as is."""

    def __init__(self, inner: LanguageModel) -> None:
        self._inner = inner

    @property
    def inner(self) -> LanguageModel:
        """The model calls are made to."""
        return self._inner

    async def complete(self, prompt: Prompt) -> str:
        """The inner model's answer to ``prompt``, the call traced (when anything records)."""
        if inert_span() is not None:
            return await self._inner.complete(prompt)
        with tracer().start_as_current_span(
            "chat",
            kind=SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": "chat",
                "esra.prompt.task": prompt.task.value,
                TENANT_ID: current_span_tenant(),
            },
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                return await self._inner.complete(prompt)
            except BaseException as exc:
                span.set_attribute("error.type", error_type(exc))
                span.set_status(StatusCode.ERROR)
                raise
