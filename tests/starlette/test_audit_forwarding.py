"""A serving host forwards the held audit records of administrative changes on a timer.

A record held because the audit sink was failing when its change was saved used to wait for
the next change or the next start. ``esra serve`` now forwards the outbox every ``[state]
audit_forward_s`` seconds (default 30), logging and carrying on while the sink still
refuses, and stops the forwarder with the host.
"""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path

import pytest

from esra.core.codes import AuditEvent
from esra.core.testing.config_contract import hold_audit_records
from esra.starlette._bootstrap import Purpose, bootstrap
from esra.starlette._settings import HostSettings
from tests.core.admin.test_audit_before_effect import SwitchableSink
from tests.starlette.test_state_settings import (  # noqa: F401 - the fixture
    _error,
    _load,
    deployment,
)

pytestmark = pytest.mark.integration

_STATE = '[state]\ndatabase = "state.db"\n{extra}[secrets]\nkeyring_file = "kek.json"\n'


def _settings(directory: Path, extra: str = "") -> HostSettings:
    settings = _load(directory, _STATE.format(extra=extra))
    assert isinstance(settings, HostSettings)
    return settings


def test_the_forward_interval_is_read_from_state(deployment: Path) -> None:  # noqa: F811
    assert _settings(deployment).state.audit_forward_s == 30.0
    assert _settings(deployment, "audit_forward_s = 5\n").state.audit_forward_s == 5.0


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0", "state.audit_forward_s: must be between 0.1 and 3600"),
        ("7200", "state.audit_forward_s: must be between 0.1 and 3600"),
        ('"30s"', "state.audit_forward_s: must be a number"),
        ("true", "state.audit_forward_s: must be a number"),
    ],
)
def test_a_bad_forward_interval_names_its_key(
    deployment: Path,  # noqa: F811
    value: str,
    expected: str,
) -> None:
    assert expected in _error(deployment, _STATE.format(extra=f"audit_forward_s = {value}\n"))


def test_the_documented_state_example_reads_as_documented(deployment: Path) -> None:  # noqa: F811
    """docs/host.md's ``[state]`` example is accepted with the forward interval it names."""
    text = (Path(__file__).parents[2] / "docs" / "host.md").read_text(encoding="utf-8")
    section = text[text.index("### Durable state: `[state]`, `[secrets]`, `[audit]`") :]
    example = re.findall(r"```toml\n(.*?)```", section, flags=re.DOTALL)[0]
    state = example[: example.index("[secrets]")]
    assert "audit_forward_s = 30.0" in state
    settings = _load(deployment, state + '[secrets]\nkeyring_file = "kek.json"\n')
    assert isinstance(settings, HostSettings)
    assert settings.state.audit_forward_s == 30.0
    assert settings.state.config_poll_s == 2.0


def _forwarders() -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks() if t.get_name() == "esra-audit-forwarder"]


async def test_a_record_held_while_the_sink_failed_reaches_it_once_it_recovers(
    deployment: Path,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = _settings(deployment, "audit_forward_s = 0.1\n")
    sink = SwitchableSink()
    sink.up = False  # the audit store is down when the change is saved
    with caplog.at_level(logging.WARNING, logger="esra.core._admin.audit_outbox"):
        async with bootstrap(settings, model=object(), audit=sink) as runtime:  # type: ignore[arg-type]
            assert runtime.workspaces is not None
            (forwarder,) = _forwarders()
            held = await hold_audit_records(runtime.workspaces, 2)
            async with asyncio.timeout(30):
                while "could not be forwarded" not in caplog.text:
                    await asyncio.sleep(0.01)
            assert await runtime.workspaces.pending_audit() == held  # kept, not lost

            sink.up = True  # it recovers; no change is made
            async with asyncio.timeout(30):
                while await runtime.workspaces.pending_audit():
                    await asyncio.sleep(0.01)
            delivered = [r for r in sink.records if r.event is AuditEvent.ADMIN_EXPOSURE_PUBLISH]
            assert delivered == held
            assert not forwarder.done()
    assert forwarder.cancelled()  # stopped with the host
    assert _forwarders() == []


async def test_only_a_serving_host_forwards_on_a_timer(deployment: Path) -> None:  # noqa: F811
    settings = _settings(deployment, "audit_forward_s = 0.1\n")
    async with bootstrap(settings, purpose=Purpose.STORES, audit=SwitchableSink()):
        assert _forwarders() == []
