"""Publication-to-served latency across hosts sharing one PostgreSQL state database.

Three ``esra serve --config`` processes start with the same settings, so they share the
``[state]`` database: its configuration, secret and audit schemas, in a database the bench
creates (``esra_bench_pub_<random>`` on ``--dsn``) and drops afterwards. Each publication is
a new PostgreSQL source (over one seeded table), its capability, access policy and exposure,
modelled through host A's admin API by the roles the chain separates and then published
(``POST /admin/v1/exposures/<slug>/publish``). The clock starts when A's publish response
has arrived and stops when the observing host's ``tools/list`` — over MCP, from a kept-open
SDK ``Client`` that bypasses its response cache — first lists the new ``esra_<slug>`` tool;
the observer asks again every ``--interval-ms`` (10 ms).

The observers, side by side over the same publications (round robin: publication *k* is
observed on host *k* mod 3, the others still apply it):

- **A itself**: the publishing host serves its publication before answering the request, so
  its latency is one ``tools/list`` round trip — the floor of what this observation can see;
- **B, LISTEN/NOTIFY**: the default host; its ``ConfigPublicationListener`` hears the
  ``esra_config_published`` notification of A's commit and wakes its ``ConfigFollower``;
- **C, polling only**: the same host with its listener's ``run`` replaced by a wait for the
  stop signal (esra has no switch to turn LISTEN off), so only the follower's
  ``config_poll_s`` tick applies. The bench checks in ``pg_stat_activity`` that exactly A's
  and B's listeners are connected.

Before each publish the bench waits a random ``[0, config_poll_s)`` so a publication lands at
a random phase of the pollers' tick, as a real one does; one unmeasured warm-up publication
comes first. Printed: p50, p95 and max per observer, the notified/polling ratio, and the
documented delay bound (``config_poll_s`` plus one sync) against the polling maximum. At the
end every host must answer a search of the last tool from PostgreSQL (the provider B and C
opened from A's publication, its secret resolved), and no host log may hold a traceback.

The DSN (a ``postgresql://`` URL; its role needs ``CREATEDB``) comes from ``--dsn`` or
``ESRA_TEST_POSTGRES_DSN`` (default ``postgresql://postgres@127.0.0.1:5432/test``); an
unreachable server (or a role that may not create databases) is reported and the script
exits 0. ``--quick``: 5 publications per observer instead of 20; ``--publications``,
``--poll-s`` (the hosts' ``config_poll_s``, esra's default unless given), ``--interval-ms``
and ``--seed`` (of the pauses) adjust it. The ``lists`` columns tell how many ``tools/list``
calls an observation took and how often the first already showed the tool (its latency is
then that one round trip, an upper bound on the host's).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import attrs
import httpx2
import psycopg
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from psycopg import sql

from esra.core._live_config import DEFAULT_POLL_S
from esra.core.config import (
    CONVERTER,
    AccessPolicy,
    BindingMode,
    Capability,
    Exposure,
    FieldSpec,
    Mapping,
    Source,
    SourceBinding,
)
from esra.postgres import text_index_statements

# Run as a script (``python bench/publication_latency.py``, as ``nox -s bench`` does), the
# project root is not on the path; the private helpers live in the ``bench`` package.
sys.path.append(str(Path(__file__).resolve().parents[1]))

from bench._serve_hosts import (
    BenchIssuer,
    ServeHost,
    postgres_state_settings,
    serve_host,
    state_password_env,
)

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"
TENANT = "bench-pub"
CLIENT_APP = "app-1"
DATA_SCHEMA = "bench_data"
TABLE = "claims"
SECRET_NAME = "claims-pw"
PROMPT = "cracked carbon frame warranty"
# The application_name bootstrap gives each host's LISTEN connection.
LISTENER_APPLICATION = "esra-config-listener"
# Replaces the listener of host C: it waits for the host's stop signal and never connects.
POLLING_ONLY = (
    "from esra.postgres._config_listener import ConfigPublicationListener",
    "async def _no_listen(self, stop):\n    await stop.wait()",
    "ConfigPublicationListener.run = _no_listen",
)
ROLES = ("SECURITY_MANAGE", "ESRA_DATA_MANAGE", "GOVERNANCE_MANAGE", "ESRA_EXPOSURE_MANAGE")
ROWS = (
    ("c-1", "Warranty claim for a cracked carbon frame", "A cracked carbon frame was reported."),
    ("c-2", "Invoice for brake pads", "Brake pads ordered for the spring service."),
)


@attrs.frozen
class Observer:
    """A host the bench watches for publications, and how it learns of them."""

    label: str
    host: ServeHost
    client: Client


@attrs.define
class Observed:
    """The latencies (seconds) one observer saw, and how many ``tools/list`` calls it made."""

    observer: Observer
    latencies: list[float] = attrs.field(factory=list)
    polls: list[int] = attrs.field(factory=list)
    missed: int = 0
    # Listed, but its search did not answer right then.
    unanswered: int = 0


# --- the bench database ---------------------------------------------------------------------


def _usable(dsn: str) -> bool:
    """Whether the server answers and the role may create the bench's database."""
    try:
        with psycopg.connect(dsn, connect_timeout=5) as conn:
            row = conn.execute(
                "SELECT rolcreatedb OR rolsuper FROM pg_roles WHERE rolname = current_user"
            ).fetchone()
    except psycopg.Error as exc:
        print(f"publication_latency: PostgreSQL unreachable ({type(exc).__name__}); skipped")
        return False
    if not (row and row[0]):
        print("publication_latency: the PostgreSQL role may not create databases; skipped")
        return False
    return True


@contextlib.contextmanager
def _bench_database(dsn: str) -> Iterator[str]:
    """A fresh database on ``dsn``'s server, dropped (its connections ended) afterwards.

    A database of its own, not schemas: notifications and ``pg_stat_activity`` are per
    database, so no other process on the server can wake, or be counted as, a host here.
    """
    name = f"esra_bench_pub_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield urlsplit(dsn)._replace(path=f"/{name}").geturl()
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def _mapping(index: int) -> Mapping:
    """Publication ``index``'s mapping; every one reads the same seeded table."""
    return Mapping(
        id=f"m-claims-{index}",
        tenant_id=TENANT,
        source_id=f"claims-{index}",
        business_name="Warranty claims",
        description="Warranty claims about bicycle frames and parts.",
        relation=TABLE,
        schema=DATA_SCHEMA,
        record_key="col_id",
        title_field="title",
        content_fields=("body",),
        fields=(
            FieldSpec("title", "col_title", is_searchable=True, is_returnable=True),
            FieldSpec("body", "col_body", is_searchable=True, is_returnable=True),
        ),
        text_index="search_tsv",
    )


def _seed(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(DATA_SCHEMA)))
        table = sql.Identifier(DATA_SCHEMA, TABLE)
        conn.execute(
            sql.SQL(
                "CREATE TABLE {} (col_id text PRIMARY KEY, col_title text, col_body text)"
            ).format(table)
        )
        with conn.cursor() as cursor:
            cursor.executemany(
                sql.SQL("INSERT INTO {} VALUES (%s, %s, %s)").format(table), list(ROWS)
            )
        for statement in text_index_statements(_mapping(0)):
            conn.execute(statement)


def _listeners(dsn: str) -> int:
    """How many hosts hold a LISTEN connection to the bench database."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name = %s",
            (LISTENER_APPLICATION,),
        ).fetchone()
    return int(row[0]) if row else 0


def _wait_for_listeners(dsn: str, expected: int) -> None:
    """Wait until ``expected`` listeners are connected, then check no other one joins."""
    deadline = time.monotonic() + 30
    while _listeners(dsn) != expected:
        if time.monotonic() > deadline:
            msg = f"expected {expected} listening hosts, found {_listeners(dsn)}"
            raise RuntimeError(msg)
        time.sleep(0.1)
    time.sleep(1.0)  # a listener of the polling-only host would have connected by now
    if (found := _listeners(dsn)) != expected:
        msg = f"expected {expected} listening hosts, found {found}"
        raise RuntimeError(msg)


# --- publishing through host A's admin API --------------------------------------------------


def _body(part: object) -> dict[str, Any]:
    body: dict[str, Any] = CONVERTER.unstructure(part)
    del body["tenant_id"]  # the token's tenant is implied
    return body


class Publisher:
    """Models and publishes one new source and exposure at a time on a host's admin API."""

    def __init__(self, admin_url: str, issuer: BenchIssuer, template: str) -> None:
        self._url = admin_url
        self._template = template
        self._clients = {
            role: httpx2.AsyncClient(
                headers={"Authorization": f"Bearer {issuer.token(TENANT, role, subject=role)}"},
                timeout=30,
            )
            for role in ROLES
        }

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()

    async def _send(self, role: str, method: str, path: str, body: Any = None) -> None:
        answer = await self._clients[role].request(method, f"{self._url}/{path}", json=body)
        if answer.status_code != 200:
            msg = f"{method} {path}: {answer.status_code} {answer.text[:500]}"
            raise RuntimeError(msg)

    async def store_secret(self, value: str) -> None:
        await self._send("SECURITY_MANAGE", "PUT", f"secrets/{SECRET_NAME}", {"value": value})

    async def draft(self, index: int) -> str:
        """Model publication ``index`` (unpublished); return its exposure's slug."""
        slug = f"claims_{index}"
        source = Source(
            id=f"claims-{index}",
            tenant_id=TENANT,
            name=f"Warranty claims {index}",
            description="Warranty claims about bicycle frames and parts.",
            provider_kind="postgres",
            connection_ref=self._template,
        )
        capability = Capability(
            id=f"cap-claims-{index}",
            tenant_id=TENANT,
            name=f"Claims {index}",
            bindings=(SourceBinding(source.id, BindingMode.MANDATORY),),
        )
        exposure = Exposure(
            id=f"exp-claims-{index}",
            tenant_id=TENANT,
            slug=slug,
            capability_id=capability.id,
            audience=frozenset({CLIENT_APP}),
            published=False,
        )
        source_body = {"source": _body(source), "mappings": [_body(_mapping(index))]}
        await self._send("ESRA_DATA_MANAGE", "PUT", f"sources/{source.id}", source_body)
        await self._send(
            "ESRA_DATA_MANAGE", "PUT", f"capabilities/{capability.id}", _body(capability)
        )
        policy = _body(AccessPolicy.matching(exposure))
        await self._send("GOVERNANCE_MANAGE", "PUT", f"access-policies/{slug}", policy)
        await self._send("ESRA_EXPOSURE_MANAGE", "PUT", f"exposures/{slug}", _body(exposure))
        return slug

    async def publish(self, slug: str) -> None:
        """Publish the exposure; returns once host A's response has arrived."""
        await self._send("ESRA_EXPOSURE_MANAGE", "POST", f"exposures/{slug}/publish")


# --- observing over MCP ---------------------------------------------------------------------


async def _listed(client: Client) -> set[str]:
    # "bypass": every observation reaches the host, whatever the SDK's response cache holds.
    return {tool.name for tool in (await client.list_tools(cache_mode="bypass")).tools}


async def _observe(
    client: Client, tool: str, started: float, *, interval_s: float, deadline_s: float
) -> tuple[float | None, int]:
    """Seconds from ``started`` until ``tool`` is listed (``None``: not by the deadline)."""
    polls = 0
    while True:
        names = await _listed(client)
        polls += 1
        elapsed = time.perf_counter() - started
        if tool in names:
            return elapsed, polls
        if elapsed > deadline_s:
            return None, polls
        await asyncio.sleep(interval_s)


@contextlib.asynccontextmanager
async def _mcp_client(url: str, token: str) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client,
    ):
        yield client


async def _answers(client: Client, tool: str) -> bool:
    """Whether ``tool``'s search answers from the seeded table now.

    Asked once, right after the tool was first listed: a host that lists a tool serves it,
    with its source's provider open (a host that listed it first and opened the provider a
    sync later answered ``ESRA_NO_SOURCES_AVAILABLE`` in between, before that was fixed).
    """
    found = await client.call_tool(tool, {"prompt": PROMPT})
    results = (found.structured_content or {}).get("results") or []
    return any("carbon frame" in str(result.get("title", "")).lower() for result in results)


# How many observations per host also call the new tool the moment it is first listed.
ANSWER_CHECKS = 5


@attrs.frozen
class Plan:
    publications: int
    poll_s: float
    interval_s: float
    seed: int


async def _measure(
    hosts: Sequence[tuple[str, ServeHost]],
    issuer: BenchIssuer,
    template: str,
    secret: str,
    plan: Plan,
) -> list[Observed]:
    rng = random.Random(plan.seed)
    deadline_s = max(30.0, 10 * plan.poll_s)
    caller = issuer.token(TENANT, subject="caller", client=CLIENT_APP)
    publisher = Publisher(f"{hosts[0][1].url}/admin/v1", issuer, template)
    async with contextlib.AsyncExitStack() as stack:
        stack.push_async_callback(publisher.aclose)
        observers = [
            Observer(label, host, await stack.enter_async_context(_mcp_client(host.url, caller)))
            for label, host in hosts
        ]
        await publisher.store_secret(secret)
        # Warm-up, unmeasured: the first provider of its kind each host opens, the first
        # notification, the first snapshot load.
        slug = await publisher.draft(0)
        await publisher.publish(slug)
        for observer in observers:
            warm, _ = await _observe(
                observer.client,
                f"esra_{slug}",
                time.perf_counter(),
                interval_s=0.05,
                deadline_s=deadline_s,
            )
            if warm is None:
                msg = f"{observer.label} never served the warm-up publication"
                raise RuntimeError(msg)
        seen = [Observed(observer) for observer in observers]
        for index in range(1, plan.publications * len(observers) + 1):
            watch = seen[index % len(observers)]
            slug = await publisher.draft(index)
            await asyncio.sleep(rng.uniform(0, plan.poll_s))
            await publisher.publish(slug)
            started = time.perf_counter()
            latency, polls = await _observe(
                watch.observer.client,
                f"esra_{slug}",
                started,
                interval_s=plan.interval_s,
                deadline_s=deadline_s,
            )
            watch.polls.append(polls)
            if latency is None:
                watch.missed += 1
            else:
                watch.latencies.append(latency)
                # Each call opens the new source's pool on that host; the server's
                # connection limit allows a few per host, not one per publication.
                if len(watch.latencies) <= ANSWER_CHECKS and not await _answers(
                    watch.observer.client, f"esra_{slug}"
                ):
                    watch.unanswered += 1
        # Every host serves the last publication's search from PostgreSQL.
        last = f"esra_{slug}"
        for observer in observers:
            listed, _ = await _observe(
                observer.client, last, time.perf_counter(), interval_s=0.05, deadline_s=deadline_s
            )
            if listed is None or not await _answers(observer.client, last):
                msg = f"{observer.label} did not answer {last}:\n{observer.host.log_tail()}"
                raise RuntimeError(msg)
    return seen


# --- report ---------------------------------------------------------------------------------


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _report(seen: Sequence[Observed], plan: Plan) -> None:
    print(
        f"publication_latency: {plan.publications} publications observed per host "
        f"({plan.publications * len(seen)} in all, round robin), each a new PostgreSQL source "
        f"+ exposure published on host A's admin API; observed by MCP tools/list every "
        f"{plan.interval_s * 1000:.0f} ms; [state] config_poll_s = {plan.poll_s:g} s; a random "
        f"pause in [0, {plan.poll_s:g}) s before each publish"
    )
    print(
        f"{'observer':<34} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'lists p50':>9} "
        f"{'at 1st list':>11}"
    )
    for observed in seen:
        lat = observed.latencies
        if not lat:
            print(f"{observed.observer.label:<34} {'none served':>8}")
            continue
        p50, p95, top = (_percentile(lat, q) * 1000 for q in (0.5, 0.95, 1.0))
        polls = _percentile([float(p) for p in observed.polls], 0.5)
        # Served at the first tools/list: the latency is then the observation's own round
        # trip, an upper bound on the host's (A's row is that round trip alone).
        first = f"{sum(p == 1 for p in observed.polls)}/{len(observed.polls)}"
        print(
            f"{observed.observer.label:<34} {p50:>8.1f} {p95:>8.1f} {top:>8.1f} {polls:>9.0f} "
            f"{first:>11}"
        )
    own, notified, polled = seen
    if not own.latencies or not notified.latencies or not polled.latencies:
        return
    ratio = _percentile(notified.latencies, 0.5) / _percentile(polled.latencies, 0.5)
    ratio95 = _percentile(notified.latencies, 0.95) / _percentile(polled.latencies, 0.95)
    print(f"LISTEN/NOTIFY / polling only: p50 {ratio:.3f}, p95 {ratio95:.3f}")
    worst = max(polled.latencies)
    over = (worst - plan.poll_s) * 1000
    excess = (
        f"config_poll_s + {over:.0f} ms: one sync plus the observation's interval and "
        f"tools/list round trip (A's p50 {_percentile(own.latencies, 0.5) * 1000:.0f} ms)"
        if over > 0
        else "within config_poll_s"
    )
    print(
        f"documented bound: config_poll_s ({plan.poll_s:g} s) plus one sync; polling-only max "
        f"{worst * 1000:.0f} ms ({excess}); notified max {max(notified.latencies) * 1000:.0f} ms"
    )


def _check_logs(hosts: Sequence[tuple[str, ServeHost]], secret: str) -> None:
    for label, host in hosts:
        text = host.log.read_text(errors="replace")
        if "Traceback" in text or secret in text:
            msg = f"{label}: the log holds a traceback or the secret:\n{host.log_tail()}"
            raise RuntimeError(msg)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="5 publications per observer")
    parser.add_argument("--publications", type=int, default=20, help="per observer")
    parser.add_argument(
        "--dsn",
        default=os.environ.get("ESRA_TEST_POSTGRES_DSN", "").strip() or DEFAULT_DSN,
        help="PostgreSQL server URL (default: $ESRA_TEST_POSTGRES_DSN)",
    )
    parser.add_argument("--poll-s", type=float, default=DEFAULT_POLL_S, help="config_poll_s")
    parser.add_argument("--interval-ms", type=float, default=10.0, help="observation interval")
    parser.add_argument("--seed", type=int, default=14, help="of the random pauses")
    return parser


def main() -> None:
    """Start three hosts on one bench database, publish on A, print latencies and the ratio."""
    args = _parser().parse_args()
    if not _usable(args.dsn):
        return
    plan = Plan(
        publications=5 if args.quick else max(1, args.publications),
        poll_s=args.poll_s,
        interval_s=args.interval_ms / 1000,
        seed=args.seed,
    )
    parts = urlsplit(args.dsn)
    # Trust authentication ignores the password; with a password, the source needs it.
    secret = parts.password or f"bench-{uuid.uuid4().hex}"
    issuer = BenchIssuer()
    with (
        _bench_database(args.dsn) as dsn,
        tempfile.TemporaryDirectory(prefix="esra-bench-pub-") as tmp,
    ):
        _seed(dsn)
        directory = Path(tmp)
        settings = postgres_state_settings(
            directory, dsn, tenant=TENANT, issuer=issuer, config_poll_s=plan.poll_s
        )
        host_port = f"{parts.hostname or '127.0.0.1'}:{parts.port or 5432}"
        database = urlsplit(dsn).path
        user = parts.username or "postgres"
        template = f"postgresql://{user}:${{secret:{SECRET_NAME}}}@{host_port}{database}"
        env = state_password_env(dsn)
        with (
            serve_host("A", settings, directory / "a.log", env=env) as host_a,
            serve_host("B", settings, directory / "b.log", env=env) as host_b,
            serve_host(
                "C", settings, directory / "c.log", env=env, preamble=POLLING_ONLY
            ) as host_c,
        ):
            _wait_for_listeners(dsn, expected=2)
            hosts = [
                ("A itself (publishing host)", host_a),
                ("B, LISTEN/NOTIFY", host_b),
                ("C, polling only (no listener)", host_c),
            ]
            seen = asyncio.run(_measure(hosts, issuer, template, secret, plan))
        _check_logs(hosts, secret)
    _report(seen, plan)
    missed = {o.observer.label: o.missed for o in seen if o.missed}
    if missed:
        msg = f"publications not served within the deadline: {missed}"
        raise RuntimeError(msg)
    unanswered = {o.observer.label: o.unanswered for o in seen if o.unanswered}
    if unanswered:
        msg = f"tools listed whose search did not answer at once: {unanswered}"
        raise RuntimeError(msg)
    print(
        f"the first {ANSWER_CHECKS} tools each host listed answered their search at once, and "
        "every host answered the last one"
    )


if __name__ == "__main__":
    main()
