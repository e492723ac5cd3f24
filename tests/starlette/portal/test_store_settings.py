"""The store's settings on the status page: shown to every operator, changed by managers."""

from __future__ import annotations

import re
from pathlib import Path

from esra.core._docstore.scanner import ScanPolicy
from esra.core.codes import AuditEvent
from tests.starlette.portal._site import (
    csrf_of,
    http,
    manager_token,
    open_site,
    reader_token,
    sign_in,
)

FORM = 'action="/portal/status/settings"'


def _revision(page: str) -> str:
    match = re.search(r'name="revision" value="(\d+)"', page)
    assert match, page
    return match.group(1)


async def test_a_manager_changes_the_settings_from_the_status_page(tmp_path: Path) -> None:
    """The form shows the current values; saving stores them, says so and is audited."""
    async with open_site(tmp_path) as site, http(site) as client:
        await sign_in(client, manager_token())
        status = await client.get("/portal/status")
        assert "Store settings" in status.text
        assert "never changed: the host&#x27;s defaults" in status.text
        assert FORM in status.text
        assert '<option value="quarantine" selected>' in status.text
        saved = await client.post(
            "/portal/status/settings",
            data={
                "csrf": csrf_of(status),
                "revision": _revision(status.text),
                "scan_policy": "reject",
                "max_attempts": "5",
                "batch_per_tenant": "10",
                # retain_bytes unchecked: an HTML form sends nothing for it
            },
        )
        assert saved.status_code == 303
        after = await client.get("/portal/status")
        assert "settings were saved" in after.text
        assert '<option value="reject" selected>' in after.text
        assert "Dropped" in after.text
        assert "revision 1, by mara" in after.text
        stored = await site.store.repository.load_configuration("larkspur")
        assert stored is not None
        assert (stored.settings.scan_policy, stored.settings.retain_bytes) == (
            ScanPolicy.REJECT,
            False,
        )
        assert (stored.settings.max_attempts, stored.settings.batch_per_tenant) == (5, 10)
    assert [r.outcome for r in site.audit.events(AuditEvent.STORE_CONFIGURE)] == ["ok"]


async def test_a_stale_form_is_refused_not_overwriting_a_newer_change(tmp_path: Path) -> None:
    """Two tabs rendered at revision 0: the second save is 409 and changes nothing."""
    async with open_site(tmp_path) as site, http(site) as client:
        await sign_in(client, manager_token())
        status = await client.get("/portal/status")
        fields = {"csrf": csrf_of(status), "revision": "0", "scan_policy": "reject"}
        first = {**fields, "max_attempts": "4", "batch_per_tenant": "20", "retain_bytes": "on"}
        assert (await client.post("/portal/status/settings", data=first)).status_code == 303
        second = {**fields, "max_attempts": "9", "batch_per_tenant": "20"}
        late = await client.post("/portal/status/settings", data=second)
        assert late.status_code == 409
        assert "Reload the status page" in late.text
        stored = await site.store.repository.load_configuration("larkspur")
        assert stored is not None
        assert stored.settings.max_attempts == 4


async def test_bad_values_and_missing_csrf_are_refused(tmp_path: Path) -> None:
    """Out of range, not a number, an unknown policy, no CSRF token: nothing is stored."""
    async with open_site(tmp_path) as site, http(site) as client:
        await sign_in(client, manager_token())
        status = await client.get("/portal/status")
        good = {
            "csrf": csrf_of(status),
            "revision": "0",
            "scan_policy": "quarantine",
            "max_attempts": "3",
            "batch_per_tenant": "20",
        }
        for field, value, code in (
            ("max_attempts", "0", 400),
            ("max_attempts", "101", 400),
            ("max_attempts", "3; DROP TABLE", 400),
            ("batch_per_tenant", "-5", 400),
            ("scan_policy", "<script>", 400),
            ("csrf", "forged", 403),
        ):
            refused = await client.post("/portal/status/settings", data={**good, field: value})
            assert refused.status_code == code, (field, value, refused.text)
            assert "<script>" not in refused.text
        assert await site.store.repository.load_configuration("larkspur") is None


async def test_a_reader_sees_the_settings_but_no_form_and_cannot_post(tmp_path: Path) -> None:
    """Read access shows the values; a forged post is 403 and audited as denied."""
    async with open_site(tmp_path) as site, http(site) as client:
        await sign_in(client, reader_token())
        status = await client.get("/portal/status")
        assert "Store settings" in status.text
        assert FORM not in status.text
        refused = await client.post(
            "/portal/status/settings",
            data={"csrf": "x", "revision": "0", "scan_policy": "index_anyway"},
        )
        assert refused.status_code == 403
        assert await site.store.repository.load_configuration("larkspur") is None
    assert [r.outcome for r in site.audit.events(AuditEvent.STORE_CONFIGURE)] == ["denied"]


async def test_every_refused_save_is_audited_without_the_form_text(tmp_path: Path) -> None:
    """A value that is not a whole number, a torn revision, an out-of-range value and an
    unknown policy are each one `rejected` record with a classified reason — whichever
    layer refused it — and none carries what the form held."""
    marker = "9x-planted-form-text"
    async with open_site(tmp_path) as site, http(site) as client:
        await sign_in(client, manager_token())
        status = await client.get("/portal/status")
        good = {
            "csrf": csrf_of(status),
            "revision": "0",
            "scan_policy": "quarantine",
            "max_attempts": "3",
            "batch_per_tenant": "20",
        }
        for field, value in (
            ("max_attempts", marker),
            ("revision", marker),
            ("batch_per_tenant", "-5"),
            ("scan_policy", marker),
        ):
            refused = await client.post("/portal/status/settings", data={**good, field: value})
            assert refused.status_code == 400, (field, refused.text)
    records = site.audit.events(AuditEvent.STORE_CONFIGURE)
    assert [r.outcome for r in records] == ["rejected"] * 4
    assert all(r.reason for r in records)
    assert all(r.tenant_id == "larkspur" for r in records)
    assert marker not in repr(records)
