"""A mapping naming what Oracle cannot hold is refused when it is published, not searched.

esra-oracle's factory states which names Oracle cannot hold (``oracle_identifier_problem``):
publication asks it about every physical name of an ``oracle`` source's mappings and refuses
the snapshot with ``ESRA_CONFIGURATION_INVALID``, naming the source, the mapping and which of
its names, never the name. Its predicate agrees with the dialect's quoter, which still refuses
such a name at search time.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from esra.core._outbound_allowlist import ConfiguredHostAllowlist
from esra.core.admin import InMemorySecretVault, Role
from esra.core.codes import ErrorCode
from esra.core.exceptions import ConfigurationError, ProviderError
from esra.core.providers import (
    ProviderRegistry,
    ProviderRequest,
    UnholdableIdentifierError,
    installed_identifier_checks,
)
from esra.oracle._factory import open_oracle_provider
from esra.oracle._identifiers import oracle_dialect, oracle_identifier_problem
from tests.core.admin.test_chain import STEPS, Admin, holder
from tests.core.factories import (
    SLUG,
    TENANT,
    make_capability,
    make_field,
    make_mapping,
    make_source,
)

HOSTILE = 'hr" "x'
PARTS = ("relation", "schema", "column", "record_key")


def _oracle_mapping(part: str, name: str) -> Any:
    if part == "column":
        return make_mapping(fields=(make_field("title"), make_field("body", column=name)))
    changes: dict[str, Any] = {part: name}
    return make_mapping(**changes)


async def _publish(h: Admin, mapping: Any) -> None:
    """The chain's four steps for one ``oracle`` source mapped by ``mapping``."""
    source = make_source("s-1", provider_kind="oracle")
    steps = list(STEPS)
    await steps[0](h, holder(Role.SECURITY_MANAGE), TENANT)
    data = holder(Role.ESRA_DATA_MANAGE)
    await h.data.model_source(data, TENANT, source, [mapping])
    await h.data.define_capability(data, TENANT, make_capability(["s-1"]))
    await steps[2](h, holder(Role.GOVERNANCE_MANAGE), TENANT)
    await steps[3](h, holder(Role.ESRA_EXPOSURE_MANAGE), TENANT)


@pytest.mark.parametrize("part", PARTS)
async def test_publishing_an_oracle_name_with_a_double_quote_is_refused(part: str) -> None:
    h = Admin()
    with pytest.raises(ConfigurationError) as raised:
        await _publish(h, _oracle_mapping(part, HOSTILE))
    error = raised.value
    assert isinstance(error, UnholdableIdentifierError)
    assert error.code is ErrorCode.ESRA_CONFIGURATION_INVALID
    assert "'s-1'" in str(error)
    assert "'m-1'" in str(error)
    assert 'hr"' not in str(error)
    # Nothing published: the runtime serves nothing, the draft's exposure is unpublished.
    assert await h.runtime.snapshot(TENANT) is None
    current = await h.current(TENANT)
    exposure = current.snapshot.exposure_by_slug(SLUG)
    assert exposure is not None
    assert not exposure.published
    assert h.audit.records[-1].outcome == "rejected"
    assert HOSTILE not in repr(h.audit.records[-1])


async def test_a_nul_and_an_overlong_name_are_refused_too() -> None:
    for name in ("hr\x00x", "x" * 129, "é" * 65):
        h = Admin()
        with pytest.raises(UnholdableIdentifierError):
            await _publish(h, _oracle_mapping("relation", name))


async def test_an_oracle_mapping_oracle_can_hold_publishes() -> None:
    h = Admin()
    await _publish(h, _oracle_mapping("relation", "a.b; DROP TABLE x --'`]) OR 1=1 é"))
    assert await h.runtime.snapshot(TENANT) is not None


def test_the_installed_oracle_factory_states_its_check() -> None:
    assert installed_identifier_checks()["oracle"] is oracle_identifier_problem
    registry = ProviderRegistry({"oracle": open_oracle_provider})
    assert registry.identifier_checks() == {"oracle": oracle_identifier_problem}


def test_opening_a_source_oracle_cannot_name_is_refused() -> None:
    # A snapshot that reached the host unpublished (esra serve --config's file) is refused
    # when its provider is opened, before anything connects.
    request = ProviderRequest(
        source=make_source("s-1", provider_kind="oracle"),
        secrets=InMemorySecretVault(),
        allowlist=ConfiguredHostAllowlist(),
        mappings=(make_mapping(relation=HOSTILE),),
    )
    with pytest.raises(UnholdableIdentifierError) as raised:
        ProviderRegistry({"oracle": open_oracle_provider}).open(request)
    assert HOSTILE not in str(raised.value)


def _quotes(name: str) -> bool:
    try:
        oracle_dialect().identifier_preparer.quote_identifier(name)
    except ProviderError:
        return False
    return True


@given(st.text(min_size=1, max_size=32))
def test_the_predicate_agrees_with_the_dialects_quoter(name: str) -> None:
    # At most 32 characters is at most 128 bytes: only what the quoter judges is judged.
    assert (oracle_identifier_problem(name) is None) is _quotes(name)


@given(st.text(alphabet=st.sampled_from(['"', "\x00", "a", " ", "é"]), min_size=1, max_size=8))
def test_the_predicate_agrees_on_names_dense_in_what_oracle_refuses(name: str) -> None:
    assert (oracle_identifier_problem(name) is None) is _quotes(name)
