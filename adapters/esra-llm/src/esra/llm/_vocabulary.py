"""A small built-in vocabulary: synonym groups and acronyms of enterprise, support, HR and
product language. Small on purpose: a wrong synonym costs precision in every request.
"""

from __future__ import annotations

from esra.llm._text import stem, tokens

__all__ = ["ACRONYMS", "AMBIGUOUS_ACRONYMS", "acronym_of", "expansion_of", "synonyms_of"]

_SYNONYM_GROUPS: tuple[tuple[str, ...], ...] = (
    ("refund", "reimbursement", "repayment", "chargeback"),
    ("laptop", "notebook", "computer"),
    ("vacation", "leave", "holiday", "pto"),
    ("salary", "pay", "compensation", "wage", "payroll"),
    ("bug", "defect", "issue", "error", "fault"),
    ("ticket", "case", "incident"),
    ("outage", "downtime", "disruption"),
    ("crash", "failure", "outage"),
    ("customer", "client"),
    ("employee", "staff", "personnel", "worker"),
    ("manager", "supervisor"),
    ("invoice", "bill"),
    ("expense", "spending", "cost"),
    ("price", "pricing", "cost"),
    ("policy", "guideline", "rule"),
    ("contract", "agreement"),
    ("password", "passcode", "credential"),
    ("login", "signin", "logon"),
    ("onboarding", "orientation", "induction"),
    ("benefit", "perk"),
    ("shipping", "delivery", "shipment"),
    ("purchase", "procurement"),
    ("feature", "capability", "functionality"),
    ("release", "version"),
    ("sick", "illness"),
    ("travel", "trip"),
    ("hiring", "recruiting", "recruitment"),
    ("resignation", "termination", "offboarding"),
    ("appraisal", "evaluation", "review"),
    ("complaint", "grievance"),
    ("phone", "mobile", "cellphone"),
    ("email", "mail"),
    ("document", "documentation", "doc"),
    ("guide", "manual", "handbook", "howto"),
    ("setup", "install", "installation", "configuration"),
    ("cancel", "cancellation"),
    ("license", "licence"),
    ("warranty", "guarantee"),
    ("fix", "patch", "workaround", "resolution"),
    ("remote", "telework", "wfh"),
)

ACRONYMS: dict[str, str] = {
    "api": "application programming interface",
    "crm": "customer relationship management",
    "csat": "customer satisfaction",
    "eod": "end of day",
    "erp": "enterprise resource planning",
    "faq": "frequently asked questions",
    "fte": "full time employee",
    "gdpr": "general data protection regulation",
    "hr": "human resources",
    "hris": "human resources information system",
    "it": "information technology",
    "kpi": "key performance indicator",
    "mfa": "multi factor authentication",
    "nda": "non disclosure agreement",
    "nps": "net promoter score",
    "okr": "objectives and key results",
    "ooo": "out of office",
    "pii": "personally identifiable information",
    "po": "purchase order",
    "pto": "paid time off",
    "qa": "quality assurance",
    "rca": "root cause analysis",
    "rfp": "request for proposal",
    "rma": "return merchandise authorization",
    "sku": "stock keeping unit",
    "sla": "service level agreement",
    "sow": "statement of work",
    "sso": "single sign on",
    "ui": "user interface",
    "us": "united states",
    "vpn": "virtual private network",
    "wfh": "work from home",
}

# Acronyms that are also ordinary words: only recognised when written in capitals.
AMBIGUOUS_ACRONYMS = frozenset({"it", "us", "po", "ooo"})


def _index() -> dict[str, tuple[str, ...]]:
    index: dict[str, dict[str, None]] = {}
    for group in _SYNONYM_GROUPS:
        for word in group:
            others = index.setdefault(stem(word), {})
            for other in group:
                if stem(other) != stem(word):
                    others[other] = None
    return {key: tuple(value) for key, value in index.items()}


_SYNONYMS = _index()
_EXPANSIONS = {tuple(tokens(expansion)): acronym for acronym, expansion in ACRONYMS.items()}


def _by_first_word() -> dict[str, tuple[tuple[tuple[str, ...], str], ...]]:
    index: dict[str, list[tuple[tuple[str, ...], str]]] = {}
    for expansion, acronym in _EXPANSIONS.items():
        index.setdefault(expansion[0], []).append((expansion, acronym))
    return {word: tuple(entries) for word, entries in index.items()}


# Expansions by their first word, each list in table order: ``acronym_of`` then compares a
# position only with the expansions that can start there (a dict lookup instead of a scan of
# the whole table at every word), and still takes the same first match.
_EXPANSIONS_BY_FIRST = _by_first_word()


def synonyms_of(word: str) -> tuple[str, ...]:
    """Return the built-in synonyms of ``word`` (matched by stem), in table order."""
    return _SYNONYMS.get(stem(word), ())


def expansion_of(word: str) -> str | None:
    """Return the expansion of the acronym ``word`` (casefolded), if it is a known one."""
    return ACRONYMS.get(word.casefold())


def acronym_of(words: list[str]) -> list[tuple[str, int, int]]:
    """Find known expansions in the word sequence ``words``.

    Returns ``(acronym, start, end)`` for each non-overlapping occurrence, in order.
    """
    found: list[tuple[str, int, int]] = []
    i = 0
    while i < len(words):
        for expansion, acronym in _EXPANSIONS_BY_FIRST.get(words[i], ()):
            end = i + len(expansion)
            if tuple(words[i:end]) == expansion:
                found.append((acronym, i, end))
                i = end
                break
        else:
            i += 1
    return found
