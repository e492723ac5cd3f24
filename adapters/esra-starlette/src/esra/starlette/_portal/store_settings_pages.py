"""The store's settings on the status page, and the form that changes them.

Every operator sees the settings the store runs on (scan policy, byte retention, attempt
ceiling, batch size) and who changed them last; an operator holding ``ESRA_DATA_MANAGE``
also gets a CSRF-checked form. The form posts the revision it was rendered at, so a change
made meanwhile by someone else is refused (409, "reload and apply again") rather than
overwritten. The core's ``StoreConfigurationService`` checks the role and audits every
change, and every refusal, with the settings before and after.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from esra.core.admin import NotPermittedError, Role
from esra.core.docstore import (
    MAX_ATTEMPTS_CEILING,
    MAX_BATCH_CEILING,
    ScanPolicy,
    StoreConfiguration,
    StoreNotReadyError,
    StoreSettingsConflictError,
    StoreSettingsError,
)
from esra.starlette._admin.errors import AdminErrorCode
from esra.starlette._portal.access import Access, forbidden
from esra.starlette._portal.errors import PortalError
from esra.starlette._portal.markup import Markup, html, join
from esra.starlette._portal.notices import Notice, redirect_with_notice
from esra.starlette._portal.session import Visitor

__all__ = ["StoreSettingsPages", "settings_section"]

_POLICY_LABELS = {
    ScanPolicy.QUARANTINE: "Quarantine for review",
    ScanPolicy.REJECT: "Reject (fail the document)",
    ScanPolicy.INDEX_ANYWAY: "Index anyway (keep the findings)",
}
_BACK = (("/status", "Store status"),)


def settings_section(base: str, visitor: Visitor, configuration: StoreConfiguration) -> Markup:
    """The settings as facts, and for a manager the form changing them."""
    settings = configuration.settings
    changed = (
        html(
            "revision {}, by {} at {}",
            configuration.revision,
            configuration.updated_by or "-",
            configuration.updated_at.strftime("%Y-%m-%d %H:%M:%S UTC")
            if configuration.updated_at
            else "-",
        )
        if configuration.revision
        else html("{}", "never changed: the host's defaults")
    )
    facts = join(
        html("<dt>{}</dt><dd>{}</dd>", name, value)
        for name, value in (
            ("When the scanner flags a document", _POLICY_LABELS[settings.scan_policy]),
            ("Original bytes after indexing", "Kept" if settings.retain_bytes else "Dropped"),
            ("Extraction attempts per document", settings.max_attempts),
            ("Documents per tenant per worker turn", settings.batch_per_tenant),
            ("Last changed", changed),
        )
    )
    return html(
        '<section aria-labelledby="settings-heading"><h2 id="settings-heading">Store settings'
        '</h2><dl class="facts">{}</dl>{}</section>',
        facts,
        _form(base, visitor, configuration) if visitor.may(Role.ESRA_DATA_MANAGE) else Markup(),
    )


def _form(base: str, visitor: Visitor, configuration: StoreConfiguration) -> Markup:
    settings = configuration.settings
    options = join(
        html(
            '<option value="{}"{}>{}</option>',
            policy.value,
            Markup(" selected") if policy is settings.scan_policy else Markup(),
            label,
        )
        for policy, label in _POLICY_LABELS.items()
    )
    return html(
        '<form method="post" action="{}/status/settings" class="stack">'
        '<input type="hidden" name="csrf" value="{}">'
        '<input type="hidden" name="revision" value="{}">'
        '<p><label for="scan_policy">When the scanner flags a document</label> '
        '<select id="scan_policy" name="scan_policy">{}</select></p>'
        '<p><input type="checkbox" id="retain_bytes" name="retain_bytes" value="on"{}> '
        '<label for="retain_bytes">Keep original bytes after indexing</label></p>'
        '<p><label for="max_attempts">Extraction attempts per document</label> '
        '<input type="number" id="max_attempts" name="max_attempts" min="1" max="{}" '
        'value="{}" required></p>'
        '<p><label for="batch_per_tenant">Documents per tenant per worker turn</label> '
        '<input type="number" id="batch_per_tenant" name="batch_per_tenant" min="1" max="{}" '
        'value="{}" required></p>'
        '<p><button type="submit">Save settings</button></p></form>',
        base,
        visitor.csrf,
        configuration.revision,
        options,
        Markup(" checked") if settings.retain_bytes else Markup(),
        MAX_ATTEMPTS_CEILING,
        settings.max_attempts,
        MAX_BATCH_CEILING,
        settings.batch_per_tenant,
    )


def _whole(form_value: object, name: str) -> int:
    text = form_value if isinstance(form_value, str) else ""
    if not (text.isascii() and text.isdigit() and len(text) <= 9):
        raise PortalError(400, "Settings not saved", f"{name} must be a whole number.", links=_BACK)
    return int(text)


class StoreSettingsPages:
    """``POST /status/settings``: change the store's settings from the status page."""

    def __init__(self, access: Access) -> None:
        self._access = access

    def routes(self) -> list[Route]:
        """The routes, relative to the portal's mount path."""
        return [Route("/status/settings", self.configure, methods=["POST"])]

    async def configure(self, request: Request) -> Response:
        """Apply the form at the revision it was rendered at; back to the status page."""
        visitor = self._access.visitor(request)
        store = self._access.store(visitor)
        if not visitor.may(Role.ESRA_DATA_MANAGE):
            raise await self._access.denied(
                store.configuration.configure(visitor.operator, {}, expected_revision=0),
                "Changing the store's settings",
            )
        form = await self._access.form(request, visitor)
        try:
            store.lifecycle.require_ready()
        except StoreNotReadyError:
            await store.configuration.refused(
                visitor.operator, "rejected", reason=AdminErrorCode.ESRA_STORE_NOT_READY.value
            )
            raise PortalError(
                409,
                "Settings not saved",
                "The store is not initialised: its settings live in it.",
                links=_BACK,
            ) from None
        try:
            changes = {
                "scan_policy": form.get("scan_policy"),
                "retain_bytes": form.get("retain_bytes") == "on",
                "max_attempts": _whole(form.get("max_attempts"), "Extraction attempts"),
                "batch_per_tenant": _whole(form.get("batch_per_tenant"), "Documents per turn"),
            }
            revision = _whole(form.get("revision"), "The revision")
        except PortalError:
            # Refused before the core sees the change, recorded as the core records its own
            # refusals: the classification only, never what the form held.
            await store.configuration.refused(
                visitor.operator, "rejected", reason=AdminErrorCode.ESRA_INVALID_REQUEST.value
            )
            raise
        try:
            await store.configuration.configure(
                visitor.operator,
                changes,
                expected_revision=revision,
            )
        except NotPermittedError:
            raise forbidden("Changing the store's settings") from None
        except StoreSettingsError as exc:
            raise PortalError(400, "Settings not saved", exc.public_message, links=_BACK) from None
        except StoreSettingsConflictError:
            raise PortalError(
                409,
                "Settings not saved",
                "Someone changed the settings since this page was shown. Reload the status "
                "page and apply your change again.",
                links=_BACK,
            ) from None
        return redirect_with_notice(request, "/status", Notice.SETTINGS_SAVED)
