"""HTML fragments of the review screen: states, counts, the list, one document, its findings.

The screen is the inverse of retrieval: it shows every state, the counts double as filters,
a failed document carries its classification and remedy, and a document Indexed with zero
segments is called out because nothing about its state says it cannot be found. A state is
always a word; colour and border style only repeat it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from esra.core.docstore import (
    DocumentFormat,
    DocumentRow,
    DocumentState,
    Finding,
    StoredDocument,
    UploadOutcome,
    scan_text,
)
from esra.starlette._portal.layout import callout
from esra.starlette._portal.markup import Markup, html, join
from esra.starlette._uploads import shown_name

__all__ = [
    "NOT_RETAINED",
    "STATE_LABELS",
    "ZERO_SEGMENTS",
    "count_filters",
    "document_callouts",
    "document_facts",
    "document_notes",
    "documents_table",
    "findings_section",
    "human_size",
    "marked_excerpt",
    "moment",
    "owner_label",
    "search_form",
    "state_badge",
    "upload_outcome_rows",
]

STATE_LABELS: Mapping[DocumentState, str] = {
    DocumentState.PENDING: "Pending",
    DocumentState.PROCESSING: "Processing",
    DocumentState.INDEXED: "Indexed",
    DocumentState.QUARANTINED: "Quarantined",
    DocumentState.FAILED: "Failed",
}
# The order an operator reads the counts in: work waiting for them first.
_COUNT_ORDER = (
    DocumentState.QUARANTINED,
    DocumentState.FAILED,
    DocumentState.PENDING,
    DocumentState.PROCESSING,
    DocumentState.INDEXED,
)
ZERO_SEGMENTS = (
    "Indexed with zero segments: this document cannot be found by any search. Its text "
    "produced nothing to index (for example a scanned PDF without a text layer). Re-index "
    "it after fixing the source, or delete it."
)
# How much context the scanner keeps on each side of a match (esra.core._docstore.scanner).
_EXCERPT_CONTEXT = 40
NOT_RETAINED = (
    "Re-index is not available: this store does not retain original bytes, so the document "
    "cannot be extracted again. To change what is indexed, delete it and upload the file again."
)


def state_badge(state: DocumentState) -> Markup:
    """The state as a word in a badge."""
    return html('<span class="badge badge-{}">{}</span>', state.value, STATE_LABELS[state])


def moment(at: datetime) -> Markup:
    """A timestamp as readable UTC text with a machine-readable ``datetime``."""
    return html('<time datetime="{}">{}</time>', at.isoformat(), at.strftime("%Y-%m-%d %H:%M UTC"))


def human_size(size: int) -> str:
    """A byte count as B, KB or MB (powers of 1024)."""
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def count_filters(
    base: str, counts: Mapping[DocumentState, int], selected: DocumentState | None
) -> Markup:
    """Store-wide counts, each a link filtering the list to its state."""
    total = sum(counts.values())
    items = [_count_link(f"{base}/documents", "All states", total, selected is None)]
    for state in _COUNT_ORDER:
        href = f"{base}/documents?state={state.value}"
        items.append(
            _count_link(href, STATE_LABELS[state], counts.get(state, 0), state is selected)
        )
    return html("<ul>{}</ul>", join(items))


def search_form(base: str, params: Mapping[str, str]) -> Markup:
    """The search box and filters (a GET form), filled in with the current search.

    The text goes through the store's full-text index and the titles; every state is
    searchable here, quarantined and failed documents included.
    """

    def options(name: str, choices: Sequence[tuple[str, str]]) -> Markup:
        chosen = params.get(name, "")
        return join(
            html(
                '<option value="{}"{}>{}</option>',
                value,
                Markup(" selected") if value == chosen else Markup(),
                label,
            )
            for value, label in (("", "Any"), *choices)
        )

    states = [(state.value, STATE_LABELS[state]) for state in _COUNT_ORDER]
    formats = [(f.value, f.value) for f in DocumentFormat]
    return html(
        '<section aria-labelledby="search-heading"><h2 id="search-heading">Search documents</h2>'
        '<form method="get" action="{}/documents" role="search" class="stack">'
        '<p><label for="search-q">Text or file name</label> '
        '<input type="search" id="search-q" name="q" value="{}" maxlength="200"></p>'
        '<p><label for="search-state">State</label> '
        '<select id="search-state" name="state">{}</select> '
        '<label for="search-type">Format</label> '
        '<select id="search-type" name="type">{}</select> '
        '<label for="search-scope">Scope</label> '
        '<input type="text" id="search-scope" name="scope" value="{}" maxlength="256"> '
        '<label for="search-uploader">Uploaded by</label> '
        '<input type="text" id="search-uploader" name="uploader" value="{}" maxlength="256"></p>'
        '<p><label for="search-since">Uploaded from (UTC)</label> '
        '<input type="date" id="search-since" name="since" value="{}"> '
        '<label for="search-until">Uploaded before (UTC)</label> '
        '<input type="date" id="search-until" name="until" value="{}"></p>'
        '<p><button type="submit">Search</button> <a href="{}/documents">Clear</a></p>'
        "</form></section>",
        base,
        params.get("q", ""),
        options("state", states),
        options("type", formats),
        params.get("scope", ""),
        params.get("uploader", ""),
        params.get("since", "")[:10],
        params.get("until", "")[:10],
        base,
    )


def _count_link(href: str, label: str, count: int, selected: bool) -> Markup:
    current = Markup(' aria-current="true"') if selected else Markup()
    shown = Markup(' <span class="shown">(shown)</span>') if selected else Markup()
    noun = "document" if count == 1 else "documents"
    return html(
        '<li><a href="{}"{}>{}: <strong>{}</strong> {}</a>{}</li>',
        href,
        current,
        label,
        count,
        noun,
        shown,
    )


def documents_table(
    base: str, rows: Sequence[DocumentRow], *, may_download: bool, caption: str
) -> Markup:
    """The review list: every row with its state, notes and (for managers) download link."""
    if not rows:
        return html("<p>{}</p>", "No documents match. Upload documents or choose another state.")
    headings = ["Title", "State", "Format", "Size", "Segments", "Scope", "Updated", "Notes"]
    if may_download:
        headings.append("Original")
    head = join(html('<th scope="col">{}</th>', h) for h in headings)
    body = join(_row(base, row, may_download=may_download) for row in rows)
    return html(
        "<table><caption>{}</caption><thead><tr>{}</tr></thead><tbody>{}</tbody></table>",
        caption,
        head,
        body,
    )


def _row(base: str, row: DocumentRow, *, may_download: bool) -> Markup:
    document = row.document
    link = f"{base}/documents/{document.id}"
    cells = [
        html('<th scope="row"><a href="{}">{}</a></th>', link, document.title),
        html("<td>{}</td>", state_badge(document.state)),
        html("<td>{}</td>", document.format.value),
        html("<td>{}</td>", human_size(document.size)),
        html("<td>{}</td>", document.segment_count),
        html("<td>{}</td>", document.scope),
        html("<td>{}</td>", moment(document.updated_at)),
        html("<td>{}</td>", document_notes(base, row)),
    ]
    if may_download:
        cells.append(_download_cell(base, document))
    return html("<tr>{}</tr>", join(cells, ""))


def _download_cell(base: str, document: StoredDocument) -> Markup:
    if not document.bytes_retained:
        return html("<td>{}</td>", "Not retained")
    return html(
        '<td><a href="{}/documents/{}/download" download>Download<span class="visually-hidden">'
        " {}</span></a></td>",
        base,
        document.id,
        document.title,
    )


def document_notes(base: str, row: DocumentRow) -> Markup:
    """What the list must say about a row beyond its state."""
    document = row.document
    notes: list[Markup] = []
    if document.state is DocumentState.FAILED:
        notes.append(_failure(document))
    if row.zero_segments:
        notes.append(
            html(
                '<p class="callout callout-warning"><strong>Not searchable.</strong> {}</p>',
                ZERO_SEGMENTS,
            )
        )
    if document.state is DocumentState.QUARANTINED:
        count = len(document.findings)
        noun = "finding" if count == 1 else "findings"
        notes.append(
            html(
                "<p><strong>Awaiting review:</strong> {} scanner {}. "
                '<a href="{}/documents/{}">Review</a></p>',
                count,
                noun,
                base,
                document.id,
            )
        )
    if document.released_by:
        notes.append(html("<p>Released from quarantine by {}.</p>", document.released_by))
    if document.owner.read_only:
        notes.append(
            html(
                "<p><strong>Read-only:</strong> kept in sync by the connector {}.</p>",
                document.owner.connector,
            )
        )
    return join(notes)


def _failure(document: StoredDocument) -> Markup:
    code = document.failure.value if document.failure else "UNCLASSIFIED"
    remedy = document.remedy or "See the host's log for the cause, then re-index the document."
    breach = (
        html("<p><strong>Safety limit:</strong> <code>{}</code></p>", document.failure_breach)
        if document.failure_breach is not None
        else Markup()
    )
    return html(
        "<p><strong>Classification:</strong> <code>{}</code></p>{}"
        "<p><strong>Remedy:</strong> {}</p>",
        code,
        breach,
        remedy,
    )


def document_facts(document: StoredDocument) -> Markup:
    """The ``<dt>``/``<dd>`` pairs describing one document."""
    facts: list[tuple[str, Markup | str | int]] = [
        ("State", state_badge(document.state)),
        ("Format", document.format.value),
        ("Size", human_size(document.size)),
        ("Security scope", document.scope),
        ("Segments", document.segment_count),
        ("Extraction attempts", document.attempts),
        ("Revision", document.revision),
        ("Uploaded", moment(document.created_at)),
        ("Uploaded by", document.uploaded_by or "-"),
        ("Updated", moment(document.updated_at)),
        ("Original bytes", "Retained" if document.bytes_retained else "Not retained"),
        ("Content SHA-256", html("<code>{}</code>", document.sha256)),
        ("Owner", owner_label(document)),
    ]
    if document.released_by:
        facts.append(("Released from quarantine by", document.released_by))
    return join(html("<dt>{}</dt><dd>{}</dd>", name, value) for name, value in facts)


def owner_label(document: StoredDocument) -> str:
    """Who owns the document, in words: an upload, or the connector keeping it in sync."""
    if document.owner.read_only:
        return f"Connector {document.owner.connector} (read-only here)"
    return "Uploaded"


def document_callouts(row: DocumentRow) -> Markup:
    """Failure classification and remedy, and the zero-segment warning, as callouts."""
    parts: list[Markup] = []
    if row.document.state is DocumentState.FAILED:
        parts.append(html('<div class="callout callout-error">{}</div>', _failure(row.document)))
    if row.zero_segments:
        parts.append(
            callout(html("<strong>Not searchable.</strong> {}", ZERO_SEGMENTS), kind="warning")
        )
    return join(parts)


def findings_section(findings: Sequence[Finding]) -> Markup:
    """Exactly what the injection scanner matched: each rule and its marked excerpt."""
    if not findings:
        return Markup()
    noun = "match" if len(findings) == 1 else "matches"
    items = join(
        html(
            "<li><p>Rule <code>{}</code> matched at characters {}–{} of the {}:</p>"
            "<blockquote>{}</blockquote></li>",
            finding.rule,
            finding.start,
            finding.end,
            "file name" if finding.in_title else "text",
            marked_excerpt(finding),
        )
        for finding in findings
    )
    return html(
        '<section aria-labelledby="findings-heading"><h2 id="findings-heading">What the '
        "injection scanner matched</h2><p>{} {}. The matched text is marked; the words "
        'around it are context.</p><ol class="findings">{}</ol></section>',
        len(findings),
        noun,
        items,
    )


def marked_excerpt(finding: Finding) -> Markup:
    """The finding's excerpt with the matched span in ``<mark>``.

    The scanner records where in the excerpt its match stands, and that is what is marked.
    A finding stored before it did has only its offsets in the text, which the excerpt's
    collapsed whitespace makes useless here; its excerpt is scanned again with the same rule,
    and a match is marked only where it is the one candidate: collapsing only shortens the
    context, so the finding's own match cannot start later than the offsets imply. With two
    candidates, or none (a rule anchored to a line start), the excerpt is shown whole and
    says so rather than marking a guess.
    """
    excerpt = finding.excerpt
    if finding.excerpt_span is not None:
        start, end = finding.excerpt_span
        return html("{}<mark>{}</mark>{}", excerpt[:start], excerpt[start:end], excerpt[end:])
    latest = min(finding.start, _EXCERPT_CONTEXT)
    spans = [f for f in scan_text(excerpt) if f.rule == finding.rule and f.start <= latest]
    if len(spans) != 1:
        reason = (
            "it depends on line breaks that the excerpt does not keep"
            if not spans
            else "the same words occur more than once in it"
        )
        return html(
            "{} <em>(the match lies within this excerpt; {}, so it is not marked)</em>",
            excerpt,
            reason,
        )
    (span,) = spans
    return html(
        "{}<mark>{}</mark>{}",
        excerpt[: span.start],
        excerpt[span.start : span.end],
        excerpt[span.end :],
    )


def upload_outcome_rows(base: str, outcomes: Sequence[UploadOutcome]) -> Markup:
    """One table row per uploaded file: stored (now Pending), stored as Failed (a safety limit
    was broken: kept for review, never indexed) or refused, with its remedy."""
    rows = []
    for outcome in outcomes:
        stored = outcome.document
        advice: Markup | str
        if stored is not None and outcome.stored_as_failed:
            code = outcome.refusal.value if outcome.refusal else "MALFORMED_DOCUMENT"
            result = html(
                "<strong>Stored as failed</strong>: {}, <code>{}</code>",
                html('<a href="{}/documents/{}">{}</a>', base, stored.id, stored.title),
                code,
            )
            advice = outcome.remedy or ""
        elif stored is not None:
            result = html(
                "<strong>Stored</strong> as {}, {}",
                html('<a href="{}/documents/{}">{}</a>', base, stored.id, stored.title),
                state_badge(stored.state),
            )
            advice = (
                "Queued for extraction; it becomes Indexed (or Quarantined for review) "
                "once the ingestion worker has read it."
            )
        else:
            code = outcome.refusal.value if outcome.refusal else "REFUSED"
            result = html("<strong>Refused</strong>: <code>{}</code>", code)
            advice = outcome.remedy or ""
        rows.append(
            html(
                '<tr><th scope="row">{}</th><td>{}</td><td>{}</td></tr>',
                shown_name(outcome),
                result,
                advice,
            )
        )
    return join(rows)
