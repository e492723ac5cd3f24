"""Where the engines' full text differs, pinned with single-term queries on the real data.

Each probe is one validated query (``contract_query``: the real validator issues it) run
straight on each engine's provider, so the LocalModel's planning does not blur what the
engine does. These are the concrete examples ``docs/engines.md`` cites; if an engine's
behaviour changes (a new MariaDB stopword list, an ``unaccent`` configuration), the test
that pinned it fails and the document must change with it.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest

from esra.core.testing.contract import contract_query
from tests.realdata._config import realdata_snapshot
from tests.realdata.conftest import ProviderFactory

pytestmark = [pytest.mark.integration, pytest.mark.external_data]

_MARKS = {"sqlite": (), "postgres": (pytest.mark.postgres,), "mysql": (pytest.mark.mysql,)}
ENGINES = [pytest.param(e, marks=_MARKS[e], id=e) for e in _MARKS]

# Record keys used below: Chinook track ids and AdventureWorks product ids.
DESAFINADO = "63"  # by "Antônio Carlos Jobim"
SANTO_ANTONIO = "405"  # a Jobim track with "Antonio" (no accent) in its title
ROAD_150 = "749"  # "ridden by race winners ... professional race team"
RIDE_THE_LIGHTNING = "1875"
WHOLE_LOTTA_LOVE = "345"
I_CANT_EXPLAIN = "2731"  # by The Who
WHO_ARE_YOU = "2749"
PENG_WU = "8"  # a résumé in Chinese: "销售经理" (sales manager) among other unspaced text


@dataclass(frozen=True)
class Probe:
    id: str
    mapping: str
    required: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    phrases: tuple[str, ...] = ()


PROBES = (
    Probe("accent", "tracks", required=("Antonio",)),
    Probe("stem-races", "products", required=("races",)),
    Probe("stem-riding", "tracks", optional=("riding",)),
    Probe("short-token", "tracks", required=("U2",)),
    Probe("stopword-phrase", "tracks", phrases=("The Who",)),
    Probe("stopword-term", "tracks", required=("who",)),
    Probe("cjk-word", "job_candidates", required=("销售",)),
)

_RESULTS: dict[str, dict[str, list[str]]] = {}


async def _run(factory: ProviderFactory) -> dict[str, list[str]]:
    mappings = {m.id: m for m in realdata_snapshot().mappings}
    providers = factory()
    keys: dict[str, list[str]] = {}
    try:
        for probe in PROBES:
            mapping = mappings[probe.mapping]
            provider = providers[mapping.source_id]
            query = contract_query(
                provider,
                mapping=mapping,
                required=probe.required,
                optional=probe.optional,
                phrases=probe.phrases,
                limit=200,
            )
            rows = await provider.execute(query, timeout_s=10.0)
            keys[probe.id] = [row.key for row in rows]
    finally:
        for provider in providers.values():
            closed = getattr(provider, "close", None)
            result = closed() if callable(closed) else None
            if inspect.isawaitable(result):
                await result
    return keys


@pytest.fixture(scope="module")
def probe(
    factory_of: Callable[[str], ProviderFactory],
) -> Callable[[str, str], Sequence[str]]:
    """``probe(engine, probe_id)``: the record keys that engine returns, best first."""

    def keys(engine: str, probe_id: str) -> Sequence[str]:
        if engine not in _RESULTS:
            _RESULTS[engine] = asyncio.run(_run(factory_of(engine)))
        return _RESULTS[engine][probe_id]

    return keys


Probed = Callable[[str, str], Sequence[str]]


@pytest.mark.parametrize("engine", ENGINES)
def test_accents(probe: Probed, engine: str) -> None:
    """'Antonio' finds 'Antônio' on FTS5 (remove_diacritics) and MariaDB (utf8mb4_unicode_ci
    is accent-insensitive), not with PostgreSQL's english configuration (no unaccent)."""
    keys = probe(engine, "accent")
    assert SANTO_ANTONIO in keys
    assert (DESAFINADO in keys) is (engine != "postgres")
    assert len(keys) == {"sqlite": 39, "postgres": 9, "mysql": 39}[engine]


@pytest.mark.parametrize("engine", ENGINES)
def test_stemming(probe: Probed, engine: str) -> None:
    """PostgreSQL's english stemmer and FTS5's porter reduce 'races' and 'riding' to 'race'
    and 'ride'; MariaDB does not stem."""
    races, riding = probe(engine, "stem-races"), probe(engine, "stem-riding")
    if engine in {"postgres", "sqlite"}:
        assert ROAD_150 in races
        assert RIDE_THE_LIGHTNING in riding
    else:
        assert races == []
        assert riding == []


@pytest.mark.parametrize("engine", ENGINES)
def test_a_two_character_term(probe: Probed, engine: str) -> None:
    """'U2' is below MariaDB's 3-character minimum token, yet all three find U2's 135 tracks:
    esra.mysql enforces a required term MATCH cannot see with an escaped LIKE."""
    assert len(probe(engine, "short-token")) == 135


@pytest.mark.parametrize("engine", ENGINES)
def test_stopwords(probe: Probed, engine: str) -> None:
    """'The Who' and 'who' are stopwords for PostgreSQL (english) and InnoDB, not for FTS5.

    PostgreSQL: a term of stopwords only tokenizes to an empty query and matches nothing.
    MariaDB: the LIKE that enforces it is a substring match, so 'who' also finds 'Whole'.
    """
    phrase, term = probe(engine, "stopword-phrase"), probe(engine, "stopword-term")
    if engine == "postgres":
        assert phrase == []
        assert term == []
        return
    assert I_CANT_EXPLAIN in phrase
    assert WHO_ARE_YOU in term
    assert (WHOLE_LOTTA_LOVE in term) is (engine == "mysql")
    assert (len(phrase), len(term)) == {"sqlite": (20, 26), "mysql": (21, 33)}[engine]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_word_inside_unspaced_chinese(probe: Probed, engine: str) -> None:
    """'销售' (sales) inside '销售经理': FTS5 unicode61 and PostgreSQL's parser keep a run of
    Han characters as one token, so only MariaDB's substring LIKE finds the word in it."""
    assert probe(engine, "cjk-word") == ([PENG_WU] if engine == "mysql" else [])
