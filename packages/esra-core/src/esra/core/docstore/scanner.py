"""Prompt-injection scanning of extracted text at ingest.

A findings-based heuristic, not a classifier: each rule is a named pattern for a technique
seen in public payload collections (instruction overrides, role resets, system-prompt
extraction, forged conversation turns or delimiters, exfiltration links, hidden text).
Findings do not decide by themselves: the store's policy turns them into quarantine (the
default), rejection, or indexing anyway, and the findings are kept so an operator sees
exactly what matched before releasing a document.
"""

from __future__ import annotations

import re
from enum import StrEnum

import attrs

__all__ = ["Finding", "ScanPolicy", "scan_text"]

MAX_FINDINGS = 50
_EXCERPT_CONTEXT = 40

_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "instruction_override",
        re.compile(
            r"\b(?:ignore|disregard|forget|override|bypass|skip)\b[^.\n]{0,40}?"
            r"\b(?:previous|prior|above|earlier|preceding|all|any|your|the|these|system)\b"
            r"[^.\n]{0,30}?\b(?:instructions?|prompts?|rules|directions|guidelines|"
            r"directives|restrictions|safety (?:filters?|guidelines))\b",
            re.IGNORECASE,
        ),
    ),
    (
        "instructions_voided",
        re.compile(
            r"\b(?:previous|prior|above|earlier|original|old)\s+(?:instructions?|prompts?|"
            r"rules)\s+(?:are|is)\s+(?:null|void|cancel+ed|revoked|obsolete|no longer)",
            re.IGNORECASE,
        ),
    ),
    (
        "new_instructions",
        re.compile(
            r"\bnew\s+(?:instructions?|instruction set|task|directive|rules?)\s*(?::|follows)",
            re.IGNORECASE,
        ),
    ),
    (
        "role_reset",
        re.compile(
            r"\byou\s+are\s+now\s+(?:an?\s+)?(?:unrestricted|unfiltered|jailbroken|uncensored|"
            r"evil|free|dan\b|in\s+(?:developer|god|admin|debug)\s+mode)|"
            r"\byou\s+are\s+no\s+longer\s+(?:bound|restricted|limited|required|an?\s+(?:ai|"
            r"assistant|language model))|\bfrom\s+now\s+on,?\s+you\s+(?:will|must|are|can)\b|"
            r"\b(?:act|behave|respond)\s+as\s+(?:an?\s+)?(?:unrestricted|unfiltered|jailbroken|"
            r"uncensored)\b|\bunrestricted\s+(?:ai|assistant|mode)\b|"
            r"\byour\s+(?:new\s+)?(?:task|goal|job|role|purpose)\s+is\s+now\b",
            re.IGNORECASE,
        ),
    ),
    (
        "jailbreak_mode",
        re.compile(
            r"\b(?:developer|god|sudo|admin|debug|jailbreak)\s+mode\b|\bdo\s+anything\s+now\b|"
            r"\[\s*(?:sudo|admin|system)\s*\]|\badmin\s+override\b|\boverride\s+safety\b",
            re.IGNORECASE,
        ),
    ),
    (
        "system_prompt_extraction",
        re.compile(
            r"\b(?:reveal|print|show|output|repeat|leak|display|tell\s+me|give\s+me)\b"
            r"[^.\n]{0,40}?\b(?:system\s+prompt|hidden\s+(?:instructions|prompt)|initial\s+"
            r"(?:instructions|prompt)|(?:your|the)\s+(?:exact\s+)?instructions)\b|"
            r"\binstructions\s+(?:were\s+)?(?:given|provided)\s+to\s+you\b",
            re.IGNORECASE,
        ),
    ),
    (
        "forged_turn",
        re.compile(
            r"^\s*(?:system|assistant|developer)\s*:|<\|?\s*(?:im_start|system|endoftext)\s*\|?>|"
            r"</?\s*(?:system|instructions?)\s*>|-{3,}\s*end\s+of\s+(?:instructions|prompt|"
            r"context)\s*-{3,}|<<\s*/?\s*(?:end-)?esra",
            re.IGNORECASE | re.MULTILINE,
        ),
    ),
    (
        "exfiltration_link",
        # A markdown image whose URL carries data in its query: the classic exfiltration beacon.
        re.compile(
            r"!\[[^\]]*\]\(\s*https?://[^)\s]*\?(?:[^)\s]*&)?(?:data|secret|q|query|prompt|"
            r"token|key|info|payload|exfil|d|c|msg|chat|history)=|"
            r"!\[[^\]]*\]\(\s*https?://[^)\s]*(?:\{|\$|%7b|<)",
            re.IGNORECASE,
        ),
    ),
    (
        "hidden_text",
        re.compile("[\u200b-\u200f\u2060-\u2064\ufeff]{3,}|[\U000e0000-\U000e007f]{3,}"),
    ),
)


class ScanPolicy(StrEnum):
    """What a store does with a document that has findings."""

    QUARANTINE = "quarantine"
    REJECT = "reject"
    INDEX_ANYWAY = "index_anyway"


@attrs.frozen
class Finding:
    """One match: the rule, where it is, and the excerpt an operator reviews."""

    rule: str
    start: int
    end: int
    excerpt: str


def scan_text(text: str) -> tuple[Finding, ...]:
    """Return the findings in ``text``, in order of position (at most 50)."""
    findings: list[Finding] = []
    for rule, pattern in _RULES:
        for match in pattern.finditer(text):
            lo = max(0, match.start() - _EXCERPT_CONTEXT)
            hi = min(len(text), match.end() + _EXCERPT_CONTEXT)
            findings.append(
                Finding(
                    rule=rule,
                    start=match.start(),
                    end=match.end(),
                    excerpt=" ".join(text[lo:hi].split()),
                )
            )
    findings.sort(key=lambda f: (f.start, f.rule))
    return tuple(findings[:MAX_FINDINGS])
