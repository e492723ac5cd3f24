"""What every remote client sends and reads besides HTTP: the prompt's text, token usage."""

from __future__ import annotations

from esra.core.prompts import Prompt, SectionKind
from esra.core.telemetry import ModelUsage, report_model_usage

__all__ = ["report_usage", "system_text", "token_count", "user_text"]


def system_text(prompt: Prompt) -> str:
    """Return the prompt's system section, for the vendor's system slot.

    Only ESRA's own instructions go there, where models weigh instructions most; the
    request and every untrusted item stay in the user turn, inside their markers.
    """
    return next(text for kind, text in prompt.sections() if kind is SectionKind.SYSTEM)


def user_text(prompt: Prompt) -> str:
    """Return the request, reference and output-contract sections as one user turn.

    Rendered exactly as ``Prompt.render()`` renders them (same headings, same order), so the
    output contract stays the last thing the model reads.
    """
    return "\n\n".join(
        f"### {kind.value.upper()}\n{text}"
        for kind, text in prompt.sections()
        if kind is not SectionKind.SYSTEM
    )


# The largest token count believed: a double's exact integers, which OTLP, JSON readers and
# the audit store all hold (an invocation's few dozen calls summed stay within 64 bits). JSON
# allows integers of thousands of digits; a figure past this is garbled, not usage.
_MAX_TOKENS = 2**53 - 1


def token_count(value: object) -> int | None:
    """Return ``value`` if it is a token count (an integer from 0 to 2**53 - 1), else
    ``None``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_TOKENS:
        return None
    return value


def report_usage(input_tokens: int | None, output_tokens: int | None) -> None:
    """Report one response's usage to the invocation's meter; garbled figures report nothing."""
    if input_tokens is not None and output_tokens is not None:
        report_model_usage(ModelUsage(input_tokens=input_tokens, output_tokens=output_tokens))
