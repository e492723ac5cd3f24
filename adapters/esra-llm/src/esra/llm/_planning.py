"""Search planning: per mapping, queries built from the request's words that cannot lose recall.

Every plan starts with a **broad** query per mapping: every informative word of the request as
an optional term, ORed, so any record the engine's OR-of-content-words search finds is found
here too. Words are ordered by informativeness (identifiers and long words first: the shorter
a word, the more often English uses it); when there are more than the source's
``max_terms_per_query``, the rest go into a second broad query rather than being dropped.
After that, only queries that add something: a query with the terms and phrases the request
*marks* as required (quotes, ``+word``, "must include word"), a RECENT query when the request
asks for the latest items and the mapping supports it, an ACRONYM query adding the other
written form of an acronym, and a SYNONYM query adding the vocabulary's synonyms. Nothing is
required because of how it is written (capitals, digits) or where it stands, and no query
repeats another's terms. Only strategies the source lists are used. The source's
``max_queries`` caps the whole answer: every mapping's broad queries come first, then the
mappings take turns with the rest.
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
from esra.llm._text import content_words, identifier_like, sanitize, stem, tokens
from esra.llm._vocabulary import synonyms_of

__all__ = ["answer_plan"]

# What a prompt from an esra-core that does not state its term bound gets (its old default).
_DEFAULT_MAX_TERMS = 16
_FILTER = re.compile(r"([A-Za-z][\w]{0,63})\s*[:=]\s*([\w.]{1,64})")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
# The strategies a term-only query may use, best first, when the source does not list KEYWORD.
_TERM_STRATEGIES = ("keyword", "synonym", "acronym", "entity")


@dataclass
class _Query:
    strategy: str
    required: list[str] = field(default_factory=list)
    optional: list[str] = field(default_factory=list)
    phrases: list[str] = field(default_factory=list)
    # Keep "layer" and "layers" both (the broad query); otherwise one term per stem.
    every_form: bool = False


def _key(term: str) -> str:
    return " ".join(stem(w) for w in term.split())


def _clean(terms: list[str], *, avoid: set[str] | None = None, by_form: bool = False) -> list[str]:
    """Sanitize, drop blanks, duplicates (by stem, or by form) and ``avoid`` stems."""
    seen = set(avoid or ())
    kept: list[str] = []
    for term in terms:
        safe = sanitize(term)
        key = safe if by_form else _key(safe)
        if safe and key not in seen:
            seen.add(key)
            kept.append(safe)
    return kept


def by_informativeness(words: list[str]) -> list[str]:
    """Return ``words`` most informative first: identifiers, then longer words, then position.

    Without the corpus's statistics, length is the stated proxy for rarity (Zipf's law of
    abbreviation: frequent words are short); codes with digits name one thing exactly.
    """
    order = sorted(enumerate(words), key=lambda p: (not identifier_like(p[1]), -len(p[1]), p[0]))
    return [word for _, word in order]


def _broad(analysis: Analysis, strategy: str, room: int) -> list[_Query]:
    # Every form as written: merging "layers" into "layer" would lose it on an engine that
    # does not stem. Sanitizing may still merge two forms into one term, never drop one.
    words = _clean(by_informativeness(list(analysis.surface)), by_form=True)
    step = max(1, room)
    return [
        _Query(strategy, optional=words[i : i + step], every_form=True)
        for i in range(0, len(words), step)
    ]


def _marked(analysis: Analysis) -> _Query | None:
    # A quoted single word is a required term, a quoted run of words a phrase.
    phrases = [q for q in analysis.quoted if " " in q]
    required = [*(q for q in analysis.quoted if " " not in q), *analysis.marked]
    if not (phrases or required):
        return None
    marked = {stem(w) for term in (*phrases, *required) for w in term.split()}
    return _Query(
        "phrase" if phrases else "keyword",
        required=required,
        phrases=phrases,
        optional=[w for w in analysis.words if stem(w) not in marked],
    )


def _acronym(analysis: Analysis) -> _Query | None:
    # Search for the other written form too: the expansion of an acronym the caller used, or
    # the acronym of an expansion the caller spelled out. Optional, like the words it joins.
    if analysis.acronyms:
        expansion = analysis.acronyms[0][1]
        return _Query("acronym", optional=[*analysis.words, *content_words(expansion)])
    if analysis.contractions:
        acronym = analysis.contractions[0][0]
        return _Query("acronym", optional=[*analysis.words, acronym])
    return None


def _synonym(analysis: Analysis) -> _Query | None:
    extra = [s for w in analysis.words for s in synonyms_of(w)]
    if not extra:
        return None
    return _Query("synonym", optional=[*analysis.words, *extra])


def _extras(analysis: Analysis, supports_recent: bool) -> list[_Query]:
    found: list[_Query | None] = [_marked(analysis)]
    if analysis.recency and supports_recent:
        found.append(_Query("recent", optional=list(analysis.words)))
    found.extend((_acronym(analysis), _synonym(analysis)))
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


def _render(mapping_id: str, query: _Query, extras: dict[str, Any], room: int) -> dict[str, Any]:
    required = _clean(query.required)[:room]
    phrases = _clean(query.phrases)[: max(room - len(required), 0)]
    avoid = {_key(t) for t in (*required, *phrases)}
    left = max(room - len(required) - len(phrases), 0)
    optional = _clean(by_informativeness(query.optional), avoid=avoid, by_form=query.every_form)
    optional = optional[:left]
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


def _signature(query: dict[str, Any]) -> tuple[object, ...]:
    # Two queries with the same terms find the same rows, whatever strategy they are named.
    return (
        query["mapping"],
        query["strategy"] == "recent",
        frozenset(map(_key, query["required_terms"])),
        frozenset(map(_key, query["optional_terms"])),
        frozenset(map(_key, query["phrases"])),
    )


def _distinct(queries: list[dict[str, Any]], seen: set[tuple[object, ...]]) -> list[dict[str, Any]]:
    kept = []
    for query in queries:
        signature = _signature(query)
        if signature not in seen and (query["strategy"] == "recent" or _has_terms(query)):
            seen.add(signature)
            kept.append(query)
    return kept


def answer_plan(prompt: Prompt) -> str:
    """Answer a planning prompt with between one and ``max_queries`` queries."""
    readable = items(prompt)
    source = next((obj for tag, obj in readable if tag == "source"), {})
    strategies = strings(source, "strategies")
    allowed = set(strategies)
    max_queries = max(1, min(20, integer(source, "max_queries", 1)))
    room = max(1, integer(source, "max_terms_per_query", _DEFAULT_MAX_TERMS))
    broad_strategy = next((s for s in _TERM_STRATEGIES if s in allowed), None)
    mappings = [
        (string(obj, "mapping"), obj)
        for tag, obj in readable
        if tag != "source" and string(obj, "mapping")
    ]
    broad: list[dict[str, Any]] = []
    per_mapping: list[list[dict[str, Any]]] = []
    seen: set[tuple[object, ...]] = set()
    # Mappings without a filter the request spells all analyse the same text: once per
    # answer is enough (kept for this answer only, so nothing of the request outlives it).
    analyses: dict[str, Analysis] = {}
    for mapping_id, obj in mappings:
        filters, rest = _filters(obj, prompt.request)
        analysis = analyses.get(rest)
        if analysis is None:
            analysis = analyses[rest] = analyse(rest)
        extras = {"fields": _fields(obj, analysis), "filters": filters}
        if broad_strategy is not None:
            queries = _broad(analysis, broad_strategy, room)
            broad += _distinct([_render(mapping_id, q, extras, room) for q in queries], seen)
        others = _extras(analysis, obj.get("supports_recent") is True)
        rendered = [_render(mapping_id, q, extras, room) for q in others if q.strategy in allowed]
        per_mapping.append(_distinct(rendered, seen))
    planned = [
        *broad,
        *(
            queries[rank]
            for rank in range(max((len(q) for q in per_mapping), default=0))
            for queries in per_mapping
            if rank < len(queries)
        ),
    ][:max_queries]
    if not planned:
        planned = _last_resort(mappings, strategies, prompt.request, room)
    return json.dumps({"queries": planned})


def _has_terms(query: dict[str, Any]) -> bool:
    return bool(query["required_terms"] or query["optional_terms"] or query["phrases"])


def _last_resort(
    mappings: list[tuple[str, dict[str, Any]]], strategies: list[str], request: str, room: int
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
            return [_render(mapping_id, _Query("recent"), {"fields": [], "filters": []}, room)]
    known = ("keyword", "phrase", "synonym", "acronym", "entity")
    preferred = [s for s in known if s in strategies]
    strategy = preferred[0] if preferred else "keyword"
    words = content_words(request) or tokens(request)
    query = _Query(strategy, optional=words)
    return [_render(mappings[0][0], query, {"fields": [], "filters": []}, room)]
