"""Find what must never leave ESRA in a response, an error or an audit record.

The security model's output-safety rule: never returned — SQL, connection details,
credentials, stack traces, provider diagnostics, unauthorized fields; anything unclassified
becomes ``ESRA_INTERNAL`` with its detail logged only. :func:`scan` checks one object against
that rule and returns every :class:`Leak` it finds (an empty list is a pass)::

    knowledge = LeakKnowledge.from_snapshot(snapshot, ctx).with_secrets([db_password])
    response = await retriever.retrieve(ctx, "travel policy")
    assert not scan(response, knowledge=knowledge)

**What is scanned, and how strictly.** A response mixes text ESRA composes with data a source
returned, and the data is untrusted: enterprise records and the hostile test corpora contain
SQL, DSNs and driver messages of their own (a prompt-injection payload may well read
``DROP TABLE users`` or ``postgres://user:pass@db:5432/app``). So the scanner tells the two
apart by where a string sits:

- *composed* text gets every rule: warning messages, status, error messages, audit events,
  outcomes, reasons and dimensions (keys and values), field names, source names, and any
  field not listed below — so a field added later is strict by default;
- *content* — ``title``, ``fragment``, the values of ``fields``, and ``answer``, ``text``,
  ``content``, ``body``, ``snippet``, ``quote``, ``excerpt``, ``summary`` at any depth —
  gets only what cannot occur in seeded data: the labels and bind names of ESRA's own
  statements (``esra_k``, ``esra_c0``, ``%(f0_0)s``, ``:lim``), Python tracebacks, and the
  exact secrets in :class:`LeakKnowledge`;
- *opaque* tokens (``result_id``, ``correlation_id``, ``document_ref``, any ``*_ref``) are
  scanned like content.

:class:`LeakKnowledge` adds what only the configuration knows: physical identifiers
(relations, schemas, text indexes, record keys, columns, connection references) and the
sources the caller may not see, which must not appear in composed text; the returnable fields
of each authorized source, outside which no result may carry a field; and secret values
(passwords, key material), which must appear nowhere, content included.
"""

from __future__ import annotations

import base64
import dataclasses
import re
from collections.abc import Iterable, Mapping
from datetime import date, datetime
from decimal import Decimal
from enum import Enum
from typing import Any
from urllib.parse import urlsplit

import attrs

from esra.core._audit.record import AuditRecord
from esra.core._config.snapshot import ConfigSnapshot
from esra.core._config.source import LifecycleState
from esra.core._context import InvocationContext
from esra.core._response import ResponseStatus, ResponseWarning, RetrievalResponse
from esra.core.codes import (
    AuditEvent,
    DocumentRefusal,
    ErrorCode,
    ProviderErrorCode,
    RejectionReason,
    WarningCode,
)
from esra.core.exceptions import EsraError
from esra.core.testing._leak_patterns import COMPOSED_RULES, CONTENT_RULES, LeakCategory

__all__ = [
    "CONTENT_NAMES",
    "OPAQUE_NAMES",
    "Leak",
    "LeakCategory",
    "LeakKnowledge",
    "format_leaks",
    "scan",
    "secret_forms",
]

CONTENT_NAMES = frozenset(
    {
        "title",
        "fragment",
        "fields",
        "answer",
        "text",
        "content",
        "body",
        "snippet",
        "quote",
        "excerpt",
        "summary",
    }
)
OPAQUE_NAMES = frozenset({"result_id", "correlation_id", "document_ref"})

_CLOSED_CODES = (WarningCode, ErrorCode, ProviderErrorCode, RejectionReason, DocumentRefusal)
_CONTEXT_CHARS = 40
_MAX_DEPTH = 12
# Short or plain-word secrets ("x", "second") would match ordinary text; they are left out.
_MIN_SECRET_CHARS = 6
_PLAIN_SECRET_CHARS = 12
_MIN_NAME_CHARS = 3
_MIN_SOURCE_CHARS = 2
_MAX_HIT_CHARS = 120
_WORD = re.compile(r"[^\W_]+|\w+")


@attrs.frozen
class Leak:
    """One finding: which rule matched where, with a redacted excerpt around the match."""

    category: LeakCategory
    rule: str
    path: str
    excerpt: str

    def __str__(self) -> str:
        return f"{self.path}: {self.rule} ({self.category.value}): {self.excerpt}"


def secret_forms(value: str | bytes) -> frozenset[str]:
    """Return the strings that would reveal ``value`` if they appeared in output.

    Text is taken as is (and a connection URL also gives its ``host:port`` and password);
    key material gives its ``repr``, hex and base64 forms. Values too short or too plain to
    tell apart from ordinary text give nothing.
    """
    if isinstance(value, bytes):
        if len(value) < _MIN_SECRET_CHARS:
            return frozenset()
        b64 = base64.b64encode(value).decode()
        url = base64.urlsafe_b64encode(value).decode().rstrip("=")
        return frozenset({repr(value), value.hex(), b64.rstrip("="), url})
    forms: set[str] = set()
    if "://" in value:
        parts = urlsplit(value)
        if parts.hostname and parts.port:
            forms.add(f"{parts.hostname}:{parts.port}")
        if parts.password:
            forms.add(parts.password)
    forms.add(value)
    return frozenset(f for f in forms if _distinctive(f))


def _distinctive(value: str) -> bool:
    if len(value) < _MIN_SECRET_CHARS:
        return False
    return len(value) >= _PLAIN_SECRET_CHARS or not value.isalpha()


@attrs.frozen
class LeakKnowledge:
    """What the configuration and the test setup know must stay inside ESRA.

    Attributes:
        secrets: exact strings that must appear nowhere (build them with
            :func:`secret_forms`).
        physical_names: identifiers that must not appear in composed text (matched as whole
            words, ignoring case).
        unauthorized_sources: ids and names of sources the caller may not see, which must
            not appear in composed text (whole words, case-sensitive).
        returnable_fields: per authorized source (by name and by id), the fields a result of
            it may carry; ``None`` when unknown, which skips the check.
    """

    secrets: frozenset[str] = frozenset()
    physical_names: frozenset[str] = frozenset()
    unauthorized_sources: frozenset[str] = frozenset()
    returnable_fields: Mapping[str, frozenset[str]] | None = None

    @classmethod
    def from_snapshot(cls, snapshot: ConfigSnapshot, ctx: InvocationContext) -> LeakKnowledge:
        """Derive the knowledge for one invocation of ``ctx`` over ``snapshot``.

        A source counts as authorized when the exposure is published to the caller's client
        application and the source is bound by its capability, inside its source subset,
        active, admitted by its source policy and by the runtime authorization. This is
        computed here, independently of scope resolution, and deliberately ignores health
        and the access policy: it only has to be a superset of what scope resolution admits.
        """
        authorized = _authorized_source_ids(snapshot, ctx)
        vocabulary = _business_vocabulary(snapshot)
        physical = {
            name
            for mapping in snapshot.mappings
            for name in (
                mapping.relation,
                mapping.schema,
                mapping.text_index,
                mapping.record_key,
                *(f.column for f in mapping.fields),
            )
            if name
        }
        physical.update(s.connection_ref for s in snapshot.sources)
        visible = {
            text.casefold()
            for s in snapshot.sources
            if s.id in authorized
            for text in (s.id, s.name, *(m.id for m in snapshot.mappings_of(s.id)))
        } | {m.business_name.casefold() for m in snapshot.mappings if m.source_id in authorized}
        hidden = {
            text
            for s in snapshot.sources
            if s.id not in authorized
            for text in (
                s.id,
                s.name,
                *(t for m in snapshot.mappings_of(s.id) for t in (m.id, m.business_name)),
            )
            if text.casefold() not in visible and len(text) >= _MIN_SOURCE_CHARS
        }
        returnable: dict[str, frozenset[str]] = {}
        for source in snapshot.sources:
            if source.id not in authorized:
                continue
            names = frozenset(
                f.name for m in snapshot.mappings_of(source.id) for f in m.returnable_fields()
            )
            for key in (source.id, source.name):
                returnable[key] = returnable.get(key, frozenset()) | names
        secrets = {
            f
            for s in snapshot.sources
            if "://" in s.connection_ref
            for f in secret_forms(s.connection_ref)
        }
        return cls(
            secrets=frozenset(secrets),
            physical_names=frozenset(
                n for n in physical if len(n) >= _MIN_NAME_CHARS and n.casefold() not in vocabulary
            ),
            unauthorized_sources=frozenset(hidden),
            returnable_fields=returnable,
        )

    def with_secrets(self, values: Iterable[str | bytes]) -> LeakKnowledge:
        """Return this knowledge with the :func:`secret_forms` of ``values`` added."""
        extra = {form for value in values for form in secret_forms(value)}
        return attrs.evolve(self, secrets=self.secrets | extra)


def _authorized_source_ids(snapshot: ConfigSnapshot, ctx: InvocationContext) -> set[str]:
    exposure = snapshot.exposure_by_slug(ctx.exposure_slug)
    if (
        snapshot.tenant_id != ctx.tenant_id
        or exposure is None
        or not exposure.published
        or ctx.client_app_id not in exposure.audience
    ):
        return set()
    capability = snapshot.capability(exposure.capability_id)
    bound = {b.source_id for b in capability.bindings} if capability else set()
    return {
        s.id
        for s in snapshot.sources
        if s.id in bound
        and (exposure.source_subset is None or s.id in exposure.source_subset)
        and s.lifecycle is LifecycleState.ACTIVE
        and (
            s.policy.allowed_client_apps is None
            or ctx.client_app_id in s.policy.allowed_client_apps
        )
        and (ctx.authorized_source_ids is None or s.id in ctx.authorized_source_ids)
    }


def _business_vocabulary(snapshot: ConfigSnapshot) -> set[str]:
    """Every business name, and every word of one, in lower case: never a physical leak."""
    texts: list[str] = [snapshot.tenant_id, snapshot.version]
    for source in snapshot.sources:
        texts += [source.id, source.name]
    for mapping in snapshot.mappings:
        texts += [mapping.id, mapping.business_name, *(f.name for f in mapping.fields)]
    for capability in snapshot.capabilities:
        texts += [capability.id, capability.name]
    for exposure in snapshot.exposures:
        texts += [exposure.id, exposure.slug]
    words = {w.casefold() for text in texts for w in _WORD.findall(text)}
    return words | {t.casefold() for t in texts}


def scan(value: object, *, knowledge: LeakKnowledge | None = None, path: str = "") -> list[Leak]:
    """Return every leak in ``value``: a response, an audit record, an error, or anything else.

    Attrs instances, dataclasses, mappings and sequences are walked, so fields added to a
    response later are covered without changing the scanner. An exception is checked as an
    error raised to a caller: it must be an ``EsraError`` with a code from the closed sets,
    a message free of leaks, and no detail when its code is ``ESRA_INTERNAL``.
    """
    scanner = _Scanner(knowledge or LeakKnowledge())
    if isinstance(value, BaseException):
        scanner.error(value, path or "error")
    else:
        scanner.walk(value, path, "composed", 0)
    return scanner.leaks


def format_leaks(leaks: Iterable[Leak]) -> str:
    """Render ``leaks`` one per line, for an assertion message or a report."""
    return "\n".join(str(leak) for leak in leaks)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _child_mode(name: str, mode: str) -> str:
    if mode != "composed":
        return mode
    if name in CONTENT_NAMES:
        return "content"
    if name in OPAQUE_NAMES or name.endswith("_ref"):
        return "opaque"
    return "composed"


def _fields_of(value: object) -> list[tuple[str, Any]] | None:
    cls: Any = type(value)
    if attrs.has(cls):
        return [(f.name, getattr(value, f.name)) for f in attrs.fields(cls)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [(f.name, getattr(value, f.name)) for f in dataclasses.fields(value)]
    public = getattr(value, "__dict__", None)
    if isinstance(public, dict):
        return [(k, v) for k, v in public.items() if not k.startswith("_")]
    return None


class _Scanner:
    def __init__(self, knowledge: LeakKnowledge) -> None:
        self.knowledge = knowledge
        self.leaks: list[Leak] = []
        self._seen: set[int] = set()
        self._physical = _token_pattern(knowledge.physical_names, re.IGNORECASE)
        self._hidden = _token_pattern(knowledge.unauthorized_sources, 0)

    def walk(self, value: object, path: str, mode: str, depth: int) -> None:
        if isinstance(value, str):
            self.text(value, path, mode)
            return
        if value is None or isinstance(value, bool | int | float | Decimal | date | datetime):
            return
        if isinstance(value, Enum):
            return
        if isinstance(value, bytes | bytearray):
            self.text(bytes(value).decode("latin-1"), path, "content")
            return
        if isinstance(value, BaseException):
            self.error(value, path)
            return
        if depth > _MAX_DEPTH or id(value) in self._seen:
            return
        self._seen.add(id(value))
        if isinstance(value, Mapping):
            self._mapping(value, path, mode, depth)
            return
        if isinstance(value, list | tuple | set | frozenset):
            items = sorted(value, key=repr) if isinstance(value, set | frozenset) else value
            for i, item in enumerate(items):
                self.walk(item, f"{path}[{i}]", mode, depth + 1)
            return
        fields = _fields_of(value)
        if fields is None:
            return
        self._check_closed_sets(value, path)
        self._check_projection(value, path)
        for name, child in fields:
            self.walk(child, _join(path, name), _child_mode(name, mode), depth + 1)

    def _mapping(self, value: Mapping[Any, Any], path: str, mode: str, depth: int) -> None:
        # The keys of ``fields`` are field names: composed, even though the values are content.
        key_mode = "composed" if path.rsplit(".", 1)[-1] == "fields" else mode
        for key, item in value.items():
            child = f"{path}[{key!r}]"
            if isinstance(key, str):
                self.text(key, f"{child}<key>", key_mode)
            self.walk(item, child, mode, depth + 1)

    def text(self, text: str, path: str, mode: str) -> None:
        rules = COMPOSED_RULES if mode == "composed" else CONTENT_RULES
        for rule in rules:
            match = rule.pattern.search(text)
            if match:
                self._add(rule.category, rule.name, path, text, match.span())
        for secret in self.knowledge.secrets:
            start = text.find(secret)
            if start >= 0:
                span = (start, start + len(secret))
                self._add(LeakCategory.CREDENTIAL, "credential.known_secret", path, text, span)
        if mode != "composed":
            return
        for pattern, rule_name in ((self._physical, "physical_name"), (self._hidden, "source")):
            found = pattern.search(text) if pattern else None
            if found:
                name = f"unauthorized.{rule_name}"
                self._add(LeakCategory.UNAUTHORIZED, name, path, text, found.span())

    def error(self, exc: BaseException, path: str) -> None:
        if not isinstance(exc, EsraError):
            # Only the type is reported: the message is exactly what must not be repeated.
            name = type(exc).__qualname__
            self.leaks.append(Leak(LeakCategory.UNCLASSIFIED, "error.not_classified", path, name))
            return
        message = str(exc)
        # Typed as closed, checked at run time: a subclass may set anything.
        code: object = exc.code
        if not isinstance(code, ErrorCode | ProviderErrorCode):
            self._add(LeakCategory.UNCLASSIFIED, "error.code", path, str(code), None)
        self.text(message, _join(path, "message"), "composed")
        self.text(exc.public_message, _join(path, "public_message"), "composed")
        fixed = {EsraError.public_message, type(exc).public_message}
        if exc.code is ErrorCode.ESRA_INTERNAL and message not in fixed:
            self._add(
                LeakCategory.UNCLASSIFIED,
                "error.internal_detail",
                _join(path, "message"),
                message,
                (0, len(message)),
            )

    def _check_closed_sets(self, value: object, path: str) -> None:
        checks: list[tuple[str, object, tuple[type[Enum], ...]]] = []
        if isinstance(value, ResponseWarning):
            checks.append(("code", value.code, (WarningCode,)))
        elif isinstance(value, RetrievalResponse):
            checks.append(("status", value.status, (ResponseStatus,)))
        elif isinstance(value, AuditRecord):
            checks.append(("event", value.event, (AuditEvent,)))
        else:
            code = getattr(value, "code", None)
            if isinstance(code, str):
                checks.append(("code", code, _CLOSED_CODES))
        for name, found, allowed in checks:
            if not isinstance(found, allowed):
                rule = f"unclassified.{name}"
                self._add(LeakCategory.UNCLASSIFIED, rule, _join(path, name), str(found), None)

    def _check_projection(self, value: object, path: str) -> None:
        """A result-shaped object (``source`` and ``fields``) carries only allowlisted fields."""
        allowed = self.knowledge.returnable_fields
        source = getattr(value, "source", None)
        fields = getattr(value, "fields", None)
        if allowed is None or not isinstance(source, str) or not isinstance(fields, Mapping):
            return
        if source not in allowed:
            self._add(
                LeakCategory.UNAUTHORIZED,
                "unauthorized.result_source",
                _join(path, "source"),
                source,
                None,
            )
            return
        for name in fields:
            if name not in allowed[source]:
                self._add(
                    LeakCategory.UNAUTHORIZED,
                    "unauthorized.field",
                    f"{_join(path, 'fields')}[{name!r}]<key>",
                    str(name),
                    None,
                )

    def _add(
        self,
        category: LeakCategory,
        rule: str,
        path: str,
        text: str,
        span: tuple[int, int] | None,
    ) -> None:
        excerpt = _excerpt(text, span, category, self.knowledge.secrets)
        self.leaks.append(Leak(category, rule, path, excerpt))


def _token_pattern(names: frozenset[str], flags: int) -> re.Pattern[str] | None:
    if not names:
        return None
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.compile(rf"(?<![\w-])(?:{alternatives})(?![\w-])", flags)


_USERINFO = re.compile(r"(://[^\s/:@]+:)[^\s/@]+@")
_ASSIGNED = re.compile(r"(?i)\b(password|passwd|pwd|secret|api[_-]?key)(\s*[=:]\s*)[^\s;,]+")
_SPACE = re.compile(r"\s+")


def _excerpt(
    text: str, span: tuple[int, int] | None, category: LeakCategory, secrets: frozenset[str]
) -> str:
    """The match with some context, whitespace collapsed and every secret masked."""
    start, end = span if span is not None else (0, len(text))
    low, high = max(0, start - _CONTEXT_CHARS), min(len(text), end + _CONTEXT_CHARS)
    hit = text[start:end]
    if hit in secrets:
        hit = "***"
    elif category is LeakCategory.CREDENTIAL:
        hit = hit[:3] + "***"
    elif len(hit) > _MAX_HIT_CHARS:
        hit = hit[:_MAX_HIT_CHARS] + "…"
    excerpt = f"{text[low:start]}[[{hit}]]{text[end:high]}"
    for secret in sorted(secrets, key=len, reverse=True):
        excerpt = excerpt.replace(secret, "***")
    excerpt = _USERINFO.sub(r"\1***@", excerpt)
    excerpt = _ASSIGNED.sub(r"\1\2***", excerpt)
    excerpt = _SPACE.sub(" ", excerpt)
    return ("…" if low else "") + excerpt + ("…" if high < len(text) else "")
