"""``esra explain QUESTION --exposure SLUG --as NAME=VALUE ...``: what the pipeline decided.

Runs one search in this process, over the host's own parts (``--config``'s, or the embedded
default's in ``--data-dir``), as the caller the options name — ``--subject``,
``--client-app`` and its claims, one ``--as NAME=VALUE`` each (repeat a name for a list) —
and prints the explanation as JSON (see ``esra.core._explain``): the scope funnel, the
selection, every plan, each validation verdict with its reason code, the statements with
their parameter names, rows per query, scores and final order, and each stage's time.

Whoever can run this command can read the host's configuration and state, so the command
line acts as an operator of the tenant, as ``esra ingest`` does: the explain is audited as
``esra.explain`` by ``cli:<OS user>``, and the explained invocation's records are marked.

The caller named must be one a token could make, as the admin API requires: a claim the host
drops from every token, a tenant claim (any trusted issuer's ``tenant_claim``) naming another
tenant, or a control character in a value or the subject is a usage error, before anything
runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from esra.core.exceptions import ConfigurationError, EsraError
from esra.starlette._data_dir import default_data_dir

if TYPE_CHECKING:
    from esra.core import ClaimValue, Explanation
    from esra.starlette._host import HostParts

__all__ = ["register"]

_EXIT_FAILED = 1
_EXIT_USAGE = 2


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``explain`` to the ``esra`` command line."""
    explain = commands.add_parser(
        "explain",
        help="run one search as a named caller and print what the pipeline decided",
        description="Explain one search for an operator: run it in this process as the "
        "caller the options name and print the pipeline's decisions as JSON.",
    )
    explain.add_argument("question", help="the search prompt, as a caller would send it")
    explain.add_argument("--exposure", required=True, help="the exposure's slug")
    explain.add_argument(
        "--as",
        dest="claims",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="one of the caller's claims; repeat a name for a list (e.g. --as region=emea)",
    )
    explain.add_argument("--subject", default="explained-caller", help="the caller's subject")
    explain.add_argument(
        "--client-app", default=None, help="the caller's client application (embedded: its one)"
    )
    explain.add_argument(
        "--tenant", default=None, help="the tenant (required with --config; embedded: its one)"
    )
    explain.add_argument(
        "--authorized-source",
        action="append",
        default=None,
        metavar="SOURCE_ID",
        help="the platform's runtime authorization, one source per option (default: none)",
    )
    explain.add_argument("--config", type=Path, default=None, help="the host's TOML settings")
    explain.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="the embedded default's data directory (default: $ESRA_HOME or ~/.esra)",
    )
    explain.set_defaults(run=_run)


def _claims(pairs: Sequence[str]) -> dict[str, ClaimValue]:
    from esra.starlette._admin.explain_api import token_claims  # noqa: PLC0415
    from esra.starlette._claim_pairs import MalformedClaimError, parse_claim_pairs  # noqa: PLC0415

    try:
        return token_claims(parse_claim_pairs(pairs))
    except MalformedClaimError as exc:
        msg = f"--as {exc}"
        raise ValueError(msg) from None
    except ValueError as exc:
        msg = f"--as: {exc}"
        raise ValueError(msg) from None


@contextlib.asynccontextmanager
async def _parts(args: argparse.Namespace) -> AsyncIterator[tuple[HostParts, str, str]]:
    """The host's parts, the tenant and the client application to explain with."""
    if args.config is not None:
        from esra.starlette._parts import open_configured  # noqa: PLC0415
        from esra.starlette._settings import load_settings  # noqa: PLC0415

        if args.tenant is None or args.client_app is None:
            msg = "--tenant and --client-app are required with --config"
            raise ValueError(msg)
        async with open_configured(load_settings(args.config)) as parts:
            yield parts, args.tenant, args.client_app
        return
    from esra.starlette._embedded import EMBEDDED_CLIENT_APP, EMBEDDED_TENANT  # noqa: PLC0415
    from esra.starlette._parts import open_embedded  # noqa: PLC0415

    async with open_embedded(args.data_dir or default_data_dir()) as parts:
        yield parts, args.tenant or EMBEDDED_TENANT, args.client_app or EMBEDDED_CLIENT_APP


async def _explain(args: argparse.Namespace) -> Explanation:
    from esra.core import CallerIdentity, Retriever, SystemClock  # noqa: PLC0415
    from esra.core.admin import EXPLAIN_ROLE, Administrator, ExplainRequest, ExplainService, Grant  # noqa: PLC0415
    from esra.core.audit import TraceLinkedAuditSink  # noqa: PLC0415
    from esra.starlette._store_init import cli_subject  # noqa: PLC0415
    from esra.starlette._stores import open_tenant_stores, ready_stores_config  # noqa: PLC0415

    claims = _claims(args.claims)
    async with contextlib.AsyncExitStack() as stack:
        parts, tenant_id, client_app = await stack.enter_async_context(_parts(args))
        audit = TraceLinkedAuditSink(parts.audit)
        clock = SystemClock()
        # The stores as a serving host has them: one not Ready is explained as not searched.
        stores = await stack.enter_async_context(
            open_tenant_stores(
                parts.stores,
                audit=audit,
                clock=clock,
                defaults=parts.store_defaults,
                shared=parts.store_states,
            )
        )
        retrievers = {}
        if tenant_id in parts.providers:
            retrievers[tenant_id] = Retriever(
                config=ready_stores_config(parts.config, stores),
                providers=parts.providers[tenant_id],
                model=parts.model,
                audit=audit,
                clock=clock,
                executor=parts.executor,
                tenant_id=tenant_id,
                health_probe_timeout_s=parts.server.health_probe_timeout_s,
                health_ttl_s=parts.server.health_ttl_s,
            )
        subject = cli_subject()
        operator = Administrator.of(
            subject, Grant(EXPLAIN_ROLE, tenant_id), home_tenant_id=tenant_id
        )
        service = ExplainService(
            retrievers,
            audit=audit,
            clock=clock,
            tenant_claims=frozenset(issuer.tenant_claim for issuer in parts.issuers),
        )
        request = ExplainRequest(
            exposure=args.exposure,
            request=args.question,
            caller=CallerIdentity(subject=args.subject, claims=claims),
            client_app_id=client_app,
            authorized_source_ids=(
                frozenset(args.authorized_source) if args.authorized_source else None
            ),
        )
        return await service.explain(operator, tenant_id, request)


def _run(args: argparse.Namespace) -> int:
    from esra.starlette._admin.explain_api import explanation_view  # noqa: PLC0415
    from esra.starlette._settings import SettingsError  # noqa: PLC0415

    try:
        explanation = asyncio.run(_explain(args))
    except SettingsError as exc:
        sys.stderr.write(f"esra: explain: {args.config}: {exc}\n")
        return _EXIT_USAGE
    except ValueError as exc:
        sys.stderr.write(f"esra: explain: {exc}\n")
        return _EXIT_USAGE
    except (ConfigurationError, OSError) as exc:
        # Found while composing (a keyring, a state database, a provider kind).
        sys.stderr.write(f"esra: explain: {exc}\n")
        return _EXIT_FAILED
    except EsraError as exc:
        # No pipeline for the tenant, or an invalid question: the classified message.
        sys.stderr.write(f"esra: explain: {exc.code.value}: {exc}\n")
        return _EXIT_USAGE
    sys.stdout.write(json.dumps(explanation_view(explanation), indent=2) + "\n")
    return 0 if explanation.error is None else _EXIT_FAILED
