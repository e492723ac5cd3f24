"""Names an engine cannot hold: refused when a mapping is published, not when it is searched.

A mapping's physical names (schema, relation, record key, text index, part-order column and
every field's column) reach its engine as identifiers, quoted by the provider's dialect. Some
engines cannot hold some names at all: no Oracle identifier holds a ``"`` or a NUL, and
Oracle has no escape for either. A provider factory may state which names its engine cannot
hold (``identifier_problem``, see ``CheckedProviderFactory``); publication asks it about every
name of every mapping of each source of its kind, and refuses the publication with
``ESRA_CONFIGURATION_INVALID`` naming the source, the mapping and which of its names — never
the name itself, which is configuration an error response must not echo. Kinds whose factory
states nothing publish as before; the provider's own refusal at search time stays, as
defence in depth.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from esra.core._config.mapping import Mapping
from esra.core._config.source import Source
from esra.core._encodable import has_lone_surrogate
from esra.core.exceptions import ConfigurationError

__all__ = [
    "IdentifierCheck",
    "UnholdableIdentifierError",
    "mapping_identifiers",
    "refuse_unholdable_identifiers",
    "unencodable_identifier_problem",
]

# Given one configured identifier, why the engine cannot hold it (without repeating it), or
# ``None`` when it can.
IdentifierCheck = Callable[[str], str | None]


def unencodable_identifier_problem(name: str) -> str | None:
    """Why no statement can carry ``name`` (without repeating it), or ``None``.

    A Python string may hold a lone surrogate (U+D800-U+DFFF; a JSON ``"\\udc80"`` escape
    decodes to one), which has no UTF-8 or UTF-16 form: every driver encodes a statement's
    text in one of them before it leaves the process, so no engine can be sent such a name.
    Each engine's own check starts with this one.
    """
    if has_lone_surrogate(name):
        return "it holds a lone surrogate (U+D800-U+DFFF), which no statement's text can encode"
    return None


class UnholdableIdentifierError(ConfigurationError):
    """A mapping names an identifier its source's engine cannot hold."""

    public_message = "A mapping names an identifier its engine cannot hold."


def mapping_identifiers(mapping: Mapping) -> tuple[tuple[str, str], ...]:
    """Every physical name of ``mapping`` with what it is, as ``(what, name)`` pairs.

    ``what`` is safe to show (it names a business field, never a physical name).
    """
    named: list[tuple[str, str]] = []
    if mapping.schema is not None:
        named.append(("schema", mapping.schema))
    named.append(("relation", mapping.relation))
    named.append(("record key column", mapping.record_key))
    if mapping.text_index is not None:
        named.append(("text index", mapping.text_index))
    if mapping.part_order_column is not None:
        named.append(("part order column", mapping.part_order_column))
    named.extend((f"column of field {spec.name!r}", spec.column) for spec in mapping.fields)
    return tuple(named)


def refuse_unholdable_identifiers(
    source: Source, mappings: Iterable[Mapping], check: IdentifierCheck
) -> None:
    """Raise when one of ``mappings`` names an identifier ``check`` says the engine cannot hold.

    Raises:
        UnholdableIdentifierError: naming the source, the mapping, which of its names, and
            why — never the name.
    """
    for mapping in mappings:
        for what, name in mapping_identifiers(mapping):
            problem = check(name)
            if problem is not None:
                msg = (
                    f"source {source.id!r} (provider kind {source.provider_kind!r}): mapping "
                    f"{mapping.id!r} names a {what} its engine cannot hold ({problem})"
                )
                raise UnholdableIdentifierError(msg)
