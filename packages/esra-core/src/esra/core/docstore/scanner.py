"""Prompt-injection scanning of extracted text at ingest.

A findings-based heuristic, not a classifier: each rule is a named pattern for a technique
seen in public payload collections. The rules group into what an injection has to do to work:
tell the model to drop what it was told (instruction overrides, voided instructions, claims
that safety is off), give it a new identity (role resets, jailbreak modes), get its
instructions out (system-prompt extraction), pass itself off as the system (forged turns and
delimiters, fake system notices, authority claims over other content), speak to the AI that
will read a document (indirect injection), smuggle data out (exfiltration links), or hide
(invisible text, encoded instructions). Findings do not decide by themselves: the store's
policy turns them into quarantine (the default), rejection, or indexing anyway, and the
findings are kept so an operator sees exactly what matched before releasing a document.

Patterns run on the folded text (:mod:`esra.core.text_normalisation`): a zero-width
character, a Cyrillic look-alike or fullwidth letters do not hide a phrase. The stored text is
never changed; each finding's offsets and excerpt refer to the original. The rule for hidden
text runs on the original, since folding is exactly what removes what it looks for.

Work is bounded: every rule is one pass over the text that stops after :data:`MAX_FINDINGS`
matches, encoded runs are decoded only up to a budget, and nothing per match is kept beyond
the first matches — so a document stuffed with millions of payloads costs no more memory
than one with fifty.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import heapq
import re
from collections.abc import Iterator
from enum import StrEnum
from itertools import islice

import attrs

from esra.core.text_normalisation import FoldedText, fold

__all__ = ["MAX_FINDINGS", "Finding", "ScanPolicy", "scan_text"]

MAX_FINDINGS = 50
_EXCERPT_CONTEXT = 40
# An excerpt shows at most this much of the match itself: a run of hidden characters or an
# encoded blob can be megabytes long, and the operator needs its start, not all of it.
_EXCERPT_MATCH = 200
# Encoded runs decoded per document, and the longest run decoded: enough for every payload
# in the public collections, bounded for a document that is one long blob.
_MAX_DECODED_RUNS = 200
_MAX_RUN = 4096

# Patterns are written in lower case and run on the lower-cased folded text: case-insensitive
# matching makes Python's regex engine several times slower on long documents.
_F = re.MULTILINE

# Words shared by several rules.
_AI = r"(?:ai|llm|gpt|chatbot|bot|assistant|language\s+model|model|agent)s?"
_INSTRUCTIONS = (
    r"(?:instructions?|prompts?|rules|directions|guidelines|directives|restrictions|"
    r"programming|training|guardrails|constraints|polic(?:y|ies)|safety\s+\w+)"
)
_SAFETY = (
    r"(?:safety|content|ethical|moderation|security|alignment)[\s_-]*(?:filters?|filtering|"
    r"guidelines|protocols?|restrictions|mode|training|module|systems?|checks?|policies|"
    r"measures|rules|features?|layers?|constraints|guardrails)"
)

_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "instruction_override",
        # An imperative to drop what came before: the verb, a determiner naming earlier or
        # governing text, then the instructions themselves.
        re.compile(
            r"\b(?:ignore|disregard|forget|override|bypass|skip|dismiss|abandon|discard|"
            r"drop|neglect|circumvent|suspend|nullify|cancel)\b[^.\n]{0,60}?"
            r"\b(?:previous|prior|above|earlier|preceding|all|any|your|the|these|system|"
            r"original|initial|existing|current|old)\b"
            rf"[^.\n]{{0,40}}?\b{_INSTRUCTIONS}\b",
            _F,
        ),
    ),
    (
        "instructions_voided",
        re.compile(
            r"\b(?:previous|prior|above|earlier|original|old|initial|your|system|all)\s+"
            r"(?:system\s+)?(?:instructions?|prompts?|rules|messages?|restrictions)\s+"
            r"(?:are|is|have\s+been|has\s+been|were)\s+(?:now\s+)?(?:null|void|cancel+ed|"
            r"revoked|obsolete|no\s+longer|deprecated|removed|lifted|suspended|disabled|"
            r"updated|replaced|overridden|superseded|outdated|invalid)",
            _F,
        ),
    ),
    (
        "new_instructions",
        re.compile(
            r"\bnew\s+(?:system\s+)?(?:instructions?|instruction set|task|directive|rules?|"
            r"system\s+(?:message|prompt))\s*(?::|follows|are\b)|"
            r"\byour\s+new\s+(?:instructions?|directives?|rules)\b",
            _F,
        ),
    ),
    (
        "role_reset",
        re.compile(
            r"\byou\s+are\s+now\s+(?:an?\s+)?(?:unrestricted|unfiltered|jailbroken|uncensored|"
            r"evil|free|dan\b|in\s+(?:developer|god|admin|debug|unrestricted)\s+mode)|"
            r"\byou\s+are\s+no\s+longer\s+(?:bound|restricted|limited|required|an?\s+(?:ai|"
            r"assistant|language model))|\bfrom\s+now\s+on,?\s+you\s+(?:will|must|are|can)\b|"
            r"\b(?:act|behave|respond|speak|answer)\s+as\s+(?:an?\s+|your\s+)?(?:unrestricted|"
            r"unfiltered|jailbroken|uncensored|alter\s+ego)\b|"
            r"\bunrestricted\s+(?:ai|assistant|mode|session|responses?)\b|"
            r"\byour\s+(?:new\s+)?(?:task|goal|job|role|purpose)\s+is\s+now\b|"
            r"\byou\s+(?:have|has)\s+no\s+(?:restrictions|rules|limits|limitations|filters|"
            r"guidelines|safety|boundaries|constraints)\b|"
            r"\byou\s+are\s+(?:dan|an?\s+ai\s+without)\b",
            _F,
        ),
    ),
    (
        "jailbreak_mode",
        re.compile(
            r"\b(?:developer|god|sudo|admin|debug|jailbreak|unrestricted|maintenance)\s+mode\b|"
            r"\bdo\s+anything\s+now\b|\[\s*(?:sudo|admin|system)\s*\]|\badmin\s+override\b|"
            r"\boverride\s+safety\b",
            _F,
        ),
    ),
    (
        "safety_disabled",
        # The claim or the order that safety is off: removing the model's restrictions is
        # what most jailbreaks and poisoned documents ask for, however they dress it.
        re.compile(
            r"\b(?:disable|disabling|remove|removing|lift|lifting|suspend|suspending|bypass|"
            r"bypassing|turn\s+off|deactivate|relax|ignore|ignoring|circumvent|evade|skip|"
            r"switch\s+off|override|overriding)\s+(?:all\s+|any\s+|the\s+|your\s+|its\s+|"
            rf"my\s+)?(?:\w+\s+)?{_SAFETY}\b|"
            rf"\b{_SAFETY}\b[\s\"':=_-]{{0,6}}(?:are\s+|is\s+|have\s+been\s+|has\s+been\s+|"
            r"now\s+)*(?:disabled|off|false|none|removed|lifted|suspended|bypassed|"
            r"deactivated|inactive|not\s+(?:enforced|active|apply)|do\s+not\s+apply|"
            r"no\s+longer\s+appl(?:y|ies))\b|"
            r"\b(?:respond|answer|reply|operate|act|behave|function|comply|output|proceed|"
            r"speak|talk|generate|write)\w*\b[^.\n]{0,40}?\bwithout\s+(?:any\s+)?(?:"
            r"restrictions|filters|filtering|limitations|limits|censorship|refusals?|"
            r"safety|guardrails|constraints|rules|ethical)\b|"
            r"\b(?:all\s+|any\s+)?restrictions\s+(?:are\s+|have\s+been\s+)?(?:lifted|removed|"
            r"disabled|suspended|off)\b|"
            r"\b(?:safety|restrictions?|restricted|filters?|filtering|guardrails|moderation|"
            r"censorship)(?:[\s_-]*(?:enabled|mode|filters?|on))?[\"']?\s*[:=]\s*[\"']?(?:off|"
            r"none|disabled|false|skip)\b|"
            r"\b(?:no|without)\s+(?:any\s+)?(?:safety|content)\s+(?:filters?|filtering|"
            r"restrictions|guidelines|training|checks|moderation)\b",
            _F,
        ),
    ),
    (
        "system_prompt_extraction",
        # A disclosure verb aimed at the model's own instructions. Verbs that only mean
        # "disclose" may take "the system prompt"; verbs with everyday uses (include, list,
        # describe) need "your": "include examples in the system prompt" is advice, "include
        # your system prompt" is the attack. "Its" or "a system prompt" is talk about prompts.
        re.compile(
            r"\b(?:reveal|print|show|output|repeat|leak|display|tell\s+me|give\s+me|share|"
            r"disclose|dump|paste|recite|expose|write\s+(?:out|down)|spell\s+out|echo)\b"
            r"[^.\n]{0,60}?\b(?:(?:your|the)\s+(?:\w+\s+){0,2}?(?:system\s+(?:prompts?|"
            r"instructions|messages?|configuration)|instructions|prompts?|initial\s+\w+|"
            r"configuration|hidden\s+\w+|rules)|system\s+prompts?|initial\s+(?:instructions|"
            r"prompt)|pre-?loaded\s+instructions)\b|"
            r"\b(?:include|provide|list|enumerate|translate|summari[sz]e|convert|describe|"
            r"confirm|send|copy|return|prepend|append|explain|quote|format|express|write|"
            r"generate|create|set|render|rewrite|transform|encode|read|state|compare|analy[sz]e|"
            r"perform|complete|put|turn|what\s+(?:are|is|were|was|does|did|would))"
            r"\b[^.\n]{0,60}?\byour\s+(?:\w+\s+){0,2}?(?:system\s+(?:prompts?|instructions|"
            r"messages?|configuration)|instructions|prompts?|initial\s+\w+|configuration|"
            r"hidden\s+\w+|rules)\b|"
            r"\binstructions\s+(?:were\s+)?(?:given|provided)\s+to\s+you\b|"
            r"\b(?:everything|all\s+(?:the\s+)?text|the\s+text)\s+(?:above|before)\b|"
            r"\byou\s+were\s+told\s+before\b|"
            r"\b(?:share|show|reveal|disclose)\s+(?:it|yours|them)\b[^.\n]{0,30}?(?:now|"
            r"with\s+me|to\s+me|please|\.|$)(?=[^\n]{0,200}?\bsystem\s+prompt)|"
            r"\bsystem\s+prompt\b(?=[^\n]{0,200}?\b(?:share|show|reveal|disclose|output)\s+"
            r"(?:it|yours|them|the\s+prompt)\b)",
            _F,
        ),
    ),
    (
        "forged_turn",
        re.compile(
            r"^\s*(?:system|assistant|developer)\s*:|<\|?\s*(?:im_start|system|endoftext)\s*\|?>|"
            r"</?\s*(?:system|instructions?)\s*>|-{3,}\s*end\s+of\s+(?:instructions|prompt|"
            r"context)\s*-{3,}|<<\s*/?\s*(?:end-)?esra|"
            r"[\[({|#]\s*(?:end|begin|start)\s+(?:of\s+)?(?:the\s+)?(?:system\s+prompt|"
            r"system\s+instructions|user\s+message|unrestricted|instructions)|"
            r"[\[({|]\s*(?:new\s+|additional\s+)?(?:system|admin|developer|root|operator)\s+"
            r"(?:message|update|override|instructions?|prompt|note|notice|directive|command|"
            r"alert|patch|policy)|"
            r"\bsystem\s+override\b|\\begin\{system\}",
            _F,
        ),
    ),
    (
        "authority_claim",
        # Content claiming rank over the instructions or the other content around it: a
        # document has no standing to supersede anything, so saying so is the attack.
        re.compile(
            r"\b(?:this|the\s+following|these)\s+(?:\w+\s+){0,2}?(?:document|instructions?|"
            r"directives?|message|note|text|override|footnote|section|content|policy|entry|"
            r"record|update|chunk|page)s?\s+(?:\w+\s+)?(?:overrides?|supersedes?|replaces?|"
            r"takes?\s+precedence\s+over|has\s+(?:system|admin)[\s-]level)\b|"
            r"\b(?:system|admin)[\s-]level\s+(?:authority|override|instructions?|directives?|"
            r"access|priority)\b|"
            r"\btreat\s+(?:this|it|all)\b[^.\n]{0,40}?\bas\s+(?:the\s+|a\s+|having\s+)?"
            r"(?:most\s+authoritative|authoritative|system|pre-?authori[sz]ed|verified|"
            r"official|trusted)|"
            r"\boverrides?\s+(?:all\s+|any\s+)?(?:your|the|default|other)\s+(?:\w+\s+)?(?:"
            r"safety|system|ai|instructions|training|behaviou?r|guidelines|messages?)\b|"
            r"\bpre-?authori[sz]ed\s+by\b|"
            r"\bsystem[\s_-]*prompt[\s_-]*(?:access|visibility|visible|disclosure|sharing)\W{0,5}"
            r"(?:is\s+)?(?:permitted|granted|enabled|approved|authori[sz]ed|true|public|allowed)\b",
            _F,
        ),
    ),
    (
        "addressed_to_ai",
        # Text that speaks to the AI which will read the document — the defining move of an
        # indirect injection; a document for people has no reason to.
        re.compile(
            r"\b(?:note|instructions?|message|directive|command|reminder)s?\s+(?:to|for)\s+"
            rf"(?:the\s+|any\s+|all\s+)?(?:\w+\s+)?{_AI}\b|"
            r"\b(?:ai|llm)[\s_-]*(?:instructions?|directives?|commands?|override|note)\b|"
            r"\b(?:ai|llm|gpt|chatbot|assistant|model|agent|bot|scanner|reviewer|summari[sz]er)"
            r"s?\b[^.\n]{0,30}?\b(?:reading|processing|reviewing|summari[sz]ing|triaging|"
            r"retrieving|parsing|analy[sz]ing|indexing|screening|scanning|ingesting)\s+"
            r"(?:this|these)\b|"
            rf"\bif\s+you\s+are\s+(?:an?\s+)?{_AI}\b|"
            r"\b(?:ai|llm)\s+(?:\w+\s+)?(?:reviewer|summari[sz]er|assistant|screener|scanner|"
            r"triage\w*|bot|agent|model|system|crawler)s?\s*:|"
            r"\bwhen\s+(?:this|the)\s+(?:\w+\s+)?(?:document|page|file|text|content|section|"
            r"chunk|passage|record|article|entry|note|review|data)\s+is\s+(?:retrieved|"
            r"summari[sz]ed|processed|ingested|indexed|parsed|included)|"
            r"\bwhen\s+(?:retrieved|summari[sz]ing|processing|retrieving)\s+this\b|"
            r"\b(?:all|any|every|the)\s+(?:\w+\s+)?(?:ai|llm)\s+(?:assistants?|systems?|models?|"
            r"agents?|bots?)\s+(?:must|should|shall|are\s+(?:required|instructed))\b|"
            r"\bthe\s+(?:ai|llm|assistant|model)\s+(?:must|should|shall)\b",
            _F,
        ),
    ),
    (
        "decode_and_follow",
        # Asking the model to decode something and act on it: the encoding exists only to
        # slip the instruction past a filter.
        re.compile(
            r"\b(?:decode|decrypt|translate|convert|apply\s+rot13|unscramble|reverse)\b"
            r"[^.\n]{0,60}?\b(?:and|then)\s+(?:\w+\s+)?(?:follow|execute|do|comply|obey|"
            r"apply|run|answer|act\s+on|perform)\b|\bdo\s+what\s+it\s+says\b|"
            r"\bfollow\s+(?:its|the\s+decoded|the\s+hidden|the\s+embedded)\s+instructions?\b",
            _F,
        ),
    ),
    (
        "exfiltration_link",
        # A markdown image whose URL carries data in its query: the classic exfiltration beacon.
        re.compile(
            r"!\[[^\]]*\]\(\s*https?://[^)\s]*\?(?:[^)\s]*&)?(?:data|secret|q|query|prompt|"
            r"token|key|info|payload|exfil|d|c|msg|chat|history)=|"
            r"!\[[^\]]*\]\(\s*https?://[^)\s]*(?:\{|\$|%7b|<)",
            _F,
        ),
    ),
)

# Hidden text is looked for in the original: runs of invisible characters (zero-width, tag,
# variation selectors — a message encoded in them), and the same written as HTML references.
_HIDDEN = re.compile(
    "[\u200b-\u200f\u2060-\u2064\ufeff\u034f\u180e\u115f\u1160\u3164\uffa0]{3,}|"
    "[\U000e0000-\U000e007f]{3,}|[\ufe00-\ufe0f\U000e0100-\U000e01ef]{3,}|"
    r"(?:&#x?(?:200[bcdef]|8203|8204|8205|2060|2061|2062|2063|2064|feff|65279|034f|847|"
    r"202[a-e]|8238)[;]?[^&\n]{0,40}?){2,}",
    re.IGNORECASE,
)

# Encoded runs worth decoding: base64 and hex long enough to hold an instruction.
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{16,}={0,2}")
_HEX_RUN = re.compile(r"(?:(?:0x|\\x)?[0-9a-fA-F]{2}[\s:,-]?){12,}")
_ENCODED_RULE = "encoded_instruction"


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


def _decode_run(run: str) -> str | None:
    """Return the text a base64 or hex run decodes to, if it is readable text."""
    compact = re.sub(r"0x|\\x|[\s:,-]", "", run)
    raw: bytes | None = None
    if re.fullmatch(r"(?:[0-9a-fA-F]{2})+", compact):
        raw = bytes.fromhex(compact)
    else:
        try:
            raw = base64.b64decode(run + "=" * (-len(run) % 4), validate=True)
        except (binascii.Error, ValueError):
            return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if text.isprintable() else None


def _any_rule_matches(text: str) -> bool:
    return any(pattern.search(text) for _, pattern in _RULES)


def _encoded(text: str) -> Iterator[tuple[str, int, int]]:
    """Spans of base64 or hex runs whose decoded text (once more decoded, at most) is flagged."""
    runs = heapq.merge(
        ((m.start(), m.end()) for m in _HEX_RUN.finditer(text)),
        ((m.start(), m.end()) for m in _BASE64_RUN.finditer(text)),
    )
    for start, end in islice(runs, _MAX_DECODED_RUNS):
        decoded = _decode_run(text[start : min(end, start + _MAX_RUN)].strip(" :,-"))
        if decoded is None:
            continue
        inner = fold(decoded)
        nested = _BASE64_RUN.fullmatch(inner.strip())
        if nested:
            inner = fold(_decode_run(nested.group()) or inner)
        inner = inner.lower()
        if _any_rule_matches(inner) or _any_rule_matches(codecs.encode(inner, "rot13")):
            yield _ENCODED_RULE, start, end


def _matches(folded: str, lowered: str) -> Iterator[tuple[str, int, int]]:
    """Each rule's first matches in the folded text, plus its ROT13 reading and encoded runs.

    ``lowered`` is ``folded`` lower-cased, position for position; ROT13 maps each ASCII letter
    to one letter, so positions in that reading are positions in the folded text too. Encoded
    runs are looked for in ``folded``, since base64 is case-sensitive.
    """
    rot13 = codecs.encode(lowered, "rot13")
    for rule, pattern in _RULES:
        for text in (lowered, rot13):
            for match in islice(pattern.finditer(text), MAX_FINDINGS):
                yield rule, match.start(), match.end()
    yield from islice(_encoded(folded), MAX_FINDINGS)


def _finding(text: str, rule: str, start: int, end: int) -> Finding:
    shown = min(end, start + _EXCERPT_MATCH)
    lo = max(0, start - _EXCERPT_CONTEXT)
    hi = min(len(text), shown + _EXCERPT_CONTEXT)
    return Finding(rule=rule, start=start, end=end, excerpt=" ".join(text[lo:hi].split()))


def scan_text(text: str) -> tuple[Finding, ...]:
    """Return the findings in ``text``, in order of position (at most 50).

    Each rule contributes at most its first 50 matches, so the 50 earliest findings overall
    are among them; no more are ever collected.
    """
    folded = FoldedText(text)
    # Folding keeps order, so the earliest folded matches are the earliest original ones:
    # only those are mapped back.
    lowered = folded.folded.lower()
    if len(lowered) != len(folded.folded):
        # Only U+0130 grows when lower-cased, and folding has already decomposed it; this
        # keeps positions exact should a future Unicode add another such letter.
        lowered = "".join(c.lower()[:1] for c in folded.folded)
    candidates: dict[tuple[int, str], int] = {}
    for rule, start, end in _matches(folded.folded, lowered):
        candidates[(start, rule)] = max(candidates.get((start, rule), 0), end)
    spans: dict[tuple[int, str], int] = {}
    for start, rule in heapq.nsmallest(MAX_FINDINGS, candidates):
        original_start, original_end = folded.original_span(start, candidates[(start, rule)])
        spans[(original_start, rule)] = max(spans.get((original_start, rule), 0), original_end)
    for match in islice(_HIDDEN.finditer(text), MAX_FINDINGS):
        spans[(match.start(), "hidden_text")] = match.end()
    first = heapq.nsmallest(MAX_FINDINGS, spans)
    return tuple(_finding(text, rule, start, spans[(start, rule)]) for start, rule in first)
