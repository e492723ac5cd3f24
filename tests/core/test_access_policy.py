"""Authorization layer 1: the exposure's access policy, published with it and evaluated first."""

from __future__ import annotations

import attrs
import pytest

from esra.core._retriever import Retriever
from esra.core.codes import AuditEvent, ErrorCode
from esra.core.config import AccessPolicy, dump_snapshot, load_snapshot
from esra.core.exceptions import ConfigurationError, ExposureNotFoundError
from esra.core.testing import (
    FakeClock,
    FakeLanguageModel,
    InMemoryAuditSink,
    InMemoryConfigRepository,
    InMemorySearchProvider,
)
from tests.core.factories import (
    CAPABILITY_ID,
    CLIENT_APP,
    SLUG,
    TENANT,
    make_capability,
    make_context,
    make_exposure,
    make_snapshot,
    make_source,
)

ROWS = {"m-s-1": [{"col_id": 1, "col_title": "Leave policy", "col_body": "28 days of leave"}]}


def _policy(**overrides: object) -> AccessPolicy:
    values: dict[str, object] = {
        "tenant_id": TENANT,
        "slug": SLUG,
        "capability_id": CAPABILITY_ID,
        "allowed_client_apps": frozenset({CLIENT_APP}),
    }
    values.update(overrides)
    return AccessPolicy(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        (_policy(tenant_id="tenant-b"), "belongs to another tenant"),
        (_policy(capability_id="cap-unknown"), "unknown capability"),
        (_policy(allowed_client_apps=frozenset({"other-app"})), "beyond its access policy"),
        (_policy(slug="another_tool"), "has no access policy"),
    ],
)
def test_a_published_exposure_needs_an_agreeing_policy_of_its_own_tenant(
    policy: AccessPolicy, message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        make_snapshot([make_source("s-1")], access_policy=policy)


def test_a_policy_naming_another_capability_than_its_exposure_is_refused() -> None:
    sources = [make_source("s-1")]
    snapshot = make_snapshot(sources)
    other = make_capability(["s-1"], capability_id="cap-2")
    with pytest.raises(ConfigurationError, match="different capabilities"):
        attrs.evolve(
            snapshot,
            capabilities=(*snapshot.capabilities, other),
            access_policies=(_policy(capability_id="cap-2"),),
        )


def test_two_policies_for_one_slug_are_refused() -> None:
    snapshot = make_snapshot([make_source("s-1")])
    with pytest.raises(ConfigurationError, match="duplicate access policy slug"):
        attrs.evolve(snapshot, access_policies=(_policy(), _policy()))


def test_a_draft_exposure_may_wait_for_its_policy() -> None:
    snapshot = make_snapshot([make_source("s-1")], exposure=make_exposure(published=False))
    assert attrs.evolve(snapshot, access_policies=()).access_policy(SLUG) is None


def test_policies_survive_a_configuration_round_trip() -> None:
    policy = _policy(required_claims=frozenset({"department"}))
    snapshot = make_snapshot([make_source("s-1")], access_policy=policy)
    assert load_snapshot(dump_snapshot(snapshot)).access_policy(SLUG) == policy


def _retriever(policy: AccessPolicy) -> tuple[Retriever, InMemoryAuditSink, FakeLanguageModel]:
    snapshot = make_snapshot([make_source("s-1")], access_policy=policy)
    audit = InMemoryAuditSink()
    model = FakeLanguageModel()
    retriever = Retriever(
        config=InMemoryConfigRepository([snapshot]),
        providers={"s-1": InMemorySearchProvider(ROWS)},
        model=model,
        audit=audit,
        clock=FakeClock(),
    )
    return retriever, audit, model


async def test_a_caller_the_policy_does_not_admit_sees_no_trace_of_the_tool() -> None:
    retriever, audit, model = _retriever(_policy(required_claims=frozenset({"department"})))

    with pytest.raises(ExposureNotFoundError) as refused:
        await retriever.retrieve(make_context(), "leave policy")
    with pytest.raises(ExposureNotFoundError) as unknown:
        await retriever.retrieve(make_context(slug="no_such_tool"), "leave policy")

    # Indistinguishable from a tool that does not exist: same code, same words.
    assert str(refused.value) == str(unknown.value)
    assert refused.value.code is ErrorCode.ESRA_EXPOSURE_NOT_FOUND
    assert model.prompts == []
    denials = [r for r in audit.records if r.event is AuditEvent.SOURCES_RESOLVE]
    assert [r.outcome for r in denials] == ["denied", "denied"]
    assert all(r.tenant_id == TENANT for r in denials)


async def test_a_caller_holding_the_required_claim_is_admitted() -> None:
    retriever, _, _ = _retriever(_policy(required_claims=frozenset({"department"})))

    response = await retriever.retrieve(make_context(claims={"department": "hr"}), "leave policy")

    assert [r.title for r in response.results] == ["Leave policy"]


@pytest.mark.parametrize(
    ("value", "held"),
    [
        ("hr", True),
        (("hr", "ops"), True),
        (False, True),  # a value; the policy checks presence, not what it says
        (0, True),
        ("", False),
        ("  ", False),
        ((), False),
        (("hr", ""), False),
        (None, False),
    ],
)
def test_a_required_claim_is_held_only_with_a_value(value: object, held: bool) -> None:
    """What identity providers send for an unset attribute or no groups holds nothing."""
    policy = _policy(required_claims=frozenset({"department"}))
    assert policy.admits(CLIENT_APP, {"department": value}) is held
