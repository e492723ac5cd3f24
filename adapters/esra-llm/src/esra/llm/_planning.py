"""Search planning: per mapping, a few queries built from the request's words.

Per mapping the candidate queries, in the order they are worth running, are: a PHRASE query
for a quoted phrase, a RECENT query when the request asks for the latest items and the mapping
supports it, a KEYWORD query, an ACRONYM query, a SYNONYM query, and a PHRASE query over the
longest noun-ish run when nothing was quoted. Only strategies the source lists are used. The
source's ``max_queries`` caps the whole answer, so mappings take turns: every mapping's best
query first, then every mapping's second, and so on.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from typing import Any

from esra.core.prompts import Prompt
from esra.llm._reference import integer, items, string, strings
from esra.llm._request import Analysis, analyse
from esra.llm._text import content_words, identifier_like, sanitize, stem, tokens, uppercase_tokens
from esra.llm._vocabulary import synonyms_of

__all__ = ["answer_plan"]

_MAX_TERMS = 16
_MAX_REQUIRED = 2
_FILTER = re.compile(r"([A-Za-z][\w]{0,63})\s*[:=]\s*([\w.]{1,64})")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


@dataclass
class _Query:
    strategy: str
    required: list[str] = field(default_factory=list)
    optional: list[str] = field(default_factory=list)
    phrases: list[str] = field(default_factory=list)

    def empty(self) -> bool:
        return not (self.required or self.optional or self.phrases) and self.strategy != "recent"


def _clean(terms: list[str], *, avoid: set[str] | None = None) -> list[str]:
    """Sanitize, drop blanks, duplicates (by stem) and ``avoid`` stems; cap the count."""
    seen = set(avoid or ())
    kept: list[str] = []
    for term in terms:
        safe = sanitize(term)
        key = " ".join(stem(w) for w in safe.split())
        if safe and key not in seen:
            seen.add(key)
            kept.append(safe)
    return kept


def _keyword(analysis: Analysis, request: str) -> _Query:
    capitals = set(uppercase_tokens(request))
    specific = [w for w in analysis.words if identifier_like(w) or w in capitals]
    required = specific[:_MAX_REQUIRED]
    optional = [w for w in analysis.words if w not in required]
    return _Query("keyword", required=required, optional=optional)


def _acronym(analysis: Analysis) -> _Query | None:
    # Search for the other written form: the expansion of an acronym the caller used, or the
    # acronym of an expansion the caller spelled out. The first one found decides.
    if analysis.acronyms:
        acronym, expansion = analysis.acronyms[0]
        rest = [w for w in analysis.words if w != acronym]
        if " " in expansion:
            return _Query("acronym", phrases=[expansion], optional=rest)
        return _Query("acronym", required=[expansion], optional=rest)
    if analysis.contractions:
        acronym, expansion = analysis.contractions[0]
        spelled = {stem(w) for w in tokens(expansion)}
        rest = [w for w in analysis.words if stem(w) not in spelled]
        return _Query("acronym", required=[acronym], optional=rest)
    return None


def _synonym(analysis: Analysis) -> _Query | None:
    extra = [s for w in analysis.words for s in synonyms_of(w)]
    if not extra:
        return None
    return _Query("synonym", optional=[*analysis.words, *extra])


def _candidates(analysis: Analysis, request: str, supports_recent: bool) -> list[_Query]:
    found: list[_Query | None] = []
    if analysis.quoted:
        phrase = analysis.quoted[0]
        in_phrase = {stem(w) for w in phrase.split()}
        rest = [w for w in analysis.words if stem(w) not in in_phrase]
        found.append(_Query("phrase", phrases=[phrase], optional=rest))
    if analysis.recency and supports_recent:
        found.append(_Query("recent", optional=list(analysis.words)))
    found.extend((_keyword(analysis, request), _acronym(analysis), _synonym(analysis)))
    if not analysis.quoted and analysis.run is not None:
        in_run = {stem(w) for w in analysis.run.split()}
        rest = [w for w in analysis.words if stem(w) not in in_run]
        found.append(_Query("phrase", phrases=[analysis.run], optional=rest))
    return [q for q in found if q is not None]


@functools.lru_cache(maxsize=1024)
def _words_of_name(name: str) -> frozenset[str]:
    # Field names come from the mapping (configuration), repeated in every planning prompt.
    return frozenset(stem(w) for w in tokens(_CAMEL.sub(" ", name)))


def _fields(mapping: dict[str, Any], analysis: Analysis) -> list[str]:
    """Return returnable fields the request names; none named → ``[]`` (the core's default)."""
    wanted = set(analysis.weights)
    names: list[str] = []
    for spec in mapping.get("fields") or []:
        if not isinstance(spec, dict) or spec.get("isReturnable") is not True:
            continue
        name = string(spec, "fieldName")
        if name and sanitize(name) == name and _words_of_name(name) & wanted:
            names.append(name)
    return list(dict.fromkeys(names))


def _filters(mapping: dict[str, Any], request: str) -> tuple[list[dict[str, Any]], str]:
    """Return equality filters the request spells as ``field:value`` on a filterable field.

    Also returns the request with those spans cut out (as a phrase break), so the filter's
    words are not searched for as terms too.
    """
    specs: dict[str, dict[str, Any]] = {}
    for spec in mapping.get("fields") or []:
        filterable = isinstance(spec, dict) and spec.get("isFilterable") is True
        if filterable and "eq" in strings(spec, "allowedOperators"):
            specs.setdefault(string(spec, "fieldName").casefold(), spec)
    filters: list[dict[str, Any]] = []
    rest = request
    for match in _FILTER.finditer(request):
        name, raw = match.groups()
        spec = specs.get(name.casefold())
        if spec is None:
            continue
        kind = string(spec, "type")
        value: str | int | bool
        if kind == "text":
            value = raw
        elif kind == "integer" and raw.isdigit() and len(raw) <= 18:
            value = int(raw)
        elif kind == "boolean" and raw.casefold() in {"true", "false"}:
            value = raw.casefold() == "true"
        else:
            continue
        if isinstance(value, str) and sanitize(value) != value:
            continue
        if len(filters) < 4:
            filters.append({"field": string(spec, "fieldName"), "operator": "eq", "value": value})
            rest = rest.replace(match.group(0), " . ", 1)
    return filters, rest


def _render(mapping_id: str, query: _Query, extras: dict[str, Any]) -> dict[str, Any]:
    required = _clean(query.required)[:_MAX_REQUIRED]
    phrases = _clean(query.phrases)[:2]
    avoid = {" ".join(stem(w) for w in t.split()) for t in (*required, *phrases)}
    room = max(_MAX_TERMS - len(required) - len(phrases), 0)
    optional = _clean(query.optional, avoid=avoid)[:room]
    return {
        "mapping": mapping_id,
        "strategy": query.strategy,
        "required_terms": required,
        "optional_terms": optional,
        "excluded_terms": [],
        "phrases": phrases,
        "filters": extras["filters"],
        "fields": extras["fields"],
        "limit": None,
    }


def answer_plan(prompt: Prompt) -> str:
    """Answer a planning prompt with between one and ``max_queries`` queries."""
    readable = items(prompt)
    source = next((obj for tag, obj in readable if tag == "source"), {})
    strategies = strings(source, "strategies")
    allowed = set(strategies)
    max_queries = max(1, min(20, integer(source, "max_queries", 1)))
    mappings = [
        (string(obj, "mapping"), obj)
        for tag, obj in readable
        if tag != "source" and string(obj, "mapping")
    ]
    per_mapping: list[list[dict[str, Any]]] = []
    # Mappings without a filter the request spells all analyse the same text: once per
    # answer is enough (kept for this answer only, so nothing of the request outlives it).
    analyses: dict[str, Analysis] = {}
    for mapping_id, obj in mappings:
        filters, rest = _filters(obj, prompt.request)
        analysis = analyses.get(rest)
        if analysis is None:
            analysis = analyses[rest] = analyse(rest)
        extras = {"fields": _fields(obj, analysis), "filters": filters}
        queries = _candidates(analysis, rest, obj.get("supports_recent") is True)
        rendered = [_render(mapping_id, q, extras) for q in queries if q.strategy in allowed]
        rendered = [q for q in rendered if q["strategy"] == "recent" or _has_terms(q)]
        per_mapping.append(rendered)
    planned = [
        queries[rank]
        for rank in range(max((len(q) for q in per_mapping), default=0))
        for queries in per_mapping
        if rank < len(queries)
    ][:max_queries]
    if not planned:
        planned = _last_resort(mappings, strategies, prompt.request)
    return json.dumps({"queries": planned})


def _has_terms(query: dict[str, Any]) -> bool:
    return bool(query["required_terms"] or query["optional_terms"] or query["phrases"])


def _last_resort(
    mappings: list[tuple[str, dict[str, Any]]], strategies: list[str], request: str
) -> list[dict[str, Any]]:
    """Return one query when nothing better fits, so the answer still meets the contract.

    A request for the latest items, on a mapping that supports recency with RECENT allowed,
    gets a term-less RECENT query; else the request's words (content words, or every word if
    none) become optional terms of the first listed known strategy. That query may be empty,
    which the validator rejects: there is nothing to search for.
    """
    if not mappings:
        # Nothing to plan against: an empty answer (which the core treats as a failed plan)
        # is better than naming a mapping the prompt never offered.
        return []
    wants_recent = analyse(request).recency and "recent" in strategies
    for mapping_id, obj in mappings:
        if wants_recent and obj.get("supports_recent") is True:
            return [_render(mapping_id, _Query("recent"), {"fields": [], "filters": []})]
    known = ("keyword", "phrase", "synonym", "acronym", "entity")
    preferred = [s for s in known if s in strategies]
    strategy = preferred[0] if preferred else "keyword"
    words = content_words(request) or tokens(request)
    query = _Query(strategy, optional=words)
    return [_render(mappings[0][0], query, {"fields": [], "filters": []})]
