"""The bound record predicate: a record-filter template resolved for one caller.

``bind_template`` turns a parsed template (``esra.core._config.record_filter_template``) into a
``RecordPredicate`` tree over *physical* columns, with every placeholder replaced by the
caller's claim value typed for its field. Providers render the tree with their own identifier
quoting and send every value — claim or literal — as a bind parameter, numbered depth-first
left to right in the order ``predicate_values`` returns them.

A placeholder whose claim is missing, empty or does not fit its field raises
``MissingClaimError``: the validator then drops the whole source (fail closed). The error
carries no claim name or value. ``coerce_claim`` and ``coerce_claim_set`` are the one claim
check of record-level security: a mapping's structured ``record_filters`` bind their claims
through them too, so both forms accept and refuse exactly the same claims.

Claim coercion, per field type:

- text: a non-empty string without control, format or line-separator characters, and
  without leading or trailing whitespace; an integer claim as its decimal digits.
  Collations ignore such characters (under MySQL's ``utf8mb4_unicode_ci`` ``'\x00emea'``
  equals ``'emea'``, and a PAD SPACE collation makes ``'emea '`` equal ``'emea'`` and ``' '``
  equal ``''``) and engines disagree on NUL, so a value holding one could match rows its
  exact text does not name: it is refused instead. The integer is one within signed 64 bits.
- integer: an integer (not a boolean) or a string of decimal digits, within signed 64 bits.
- number: an integer, or a string of decimal digits with an optional fraction that a float
  holds exactly as written (``0.1`` is; ``2.9999999999999999`` would become ``3.0`` and match
  ``<= 3`` rows it does not name, so it is refused).
- boolean: a boolean only.
- date: an ISO-8601 date string, sent in its canonical ``YYYY-MM-DD`` form.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping as MappingABC
from datetime import date
from decimal import Decimal
from typing import assert_never

import attrs

from esra.core._config.mapping import FieldType, Mapping, Operator
from esra.core._config.record_filter_template import (
    And,
    Comparison,
    Expression,
    InClaim,
    InList,
    IsNull,
    Literal,
    Not,
    Operand,
    Or,
    RecordFilterTemplate,
)
from esra.core._query import Scalar

__all__ = [
    "MAX_CLAIM_VALUES",
    "MissingClaimError",
    "PredicateAnd",
    "PredicateComparison",
    "PredicateIsNull",
    "PredicateNot",
    "PredicateOr",
    "RecordPredicate",
    "bind_template",
    "coerce_claim",
    "coerce_claim_set",
    "predicate_columns",
    "predicate_shape",
    "predicate_values",
]

# Oracle refuses more than 1000 expressions in one IN list; a larger claim cannot be bound
# on every engine, so it is refused everywhere (fail closed) rather than truncated.
MAX_CLAIM_VALUES = 1000
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1
_INTEGER_TEXT = re.compile(r"-?[0-9]{1,19}")
_NUMBER_TEXT = re.compile(r"-?[0-9]{1,19}(?:\.[0-9]{1,30})?")
# Control, format (zero-width), surrogate and line/paragraph separator characters.
_IGNORABLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


@attrs.frozen
class PredicateComparison:
    """``column <operator> value`` (or ``column IN (values...)`` for ``Operator.IN``)."""

    column: str
    type: FieldType
    operator: Operator
    values: tuple[Scalar, ...]


@attrs.frozen
class PredicateIsNull:
    """``column IS NULL``, or ``IS NOT NULL`` when ``negated``."""

    column: str
    negated: bool = False


@attrs.frozen
class PredicateAnd:
    """Every operand holds."""

    operands: tuple[RecordPredicate, ...]


@attrs.frozen
class PredicateOr:
    """At least one operand holds."""

    operands: tuple[RecordPredicate, ...]


@attrs.frozen
class PredicateNot:
    """The operand does not hold (NOT of unknown stays unknown, as in SQL)."""

    operand: RecordPredicate


RecordPredicate = PredicateComparison | PredicateIsNull | PredicateAnd | PredicateOr | PredicateNot


class MissingClaimError(Exception):
    """A placeholder cannot be bound for this caller; never leaves the validator."""


def bind_template(
    template: RecordFilterTemplate, mapping: Mapping, claims: MappingABC[str, object]
) -> RecordPredicate:
    """Bind ``template`` (parsed over ``mapping``) to ``claims``.

    Raises:
        MissingClaimError: a placeholder's claim is missing, empty, or not coercible to its
            field's type; the caller must drop the source.
    """
    return _bind(template.expression, mapping, claims)


def _bind(
    expression: Expression, mapping: Mapping, claims: MappingABC[str, object]
) -> RecordPredicate:
    match expression:
        case And(operands=operands):
            return PredicateAnd(tuple(_bind(o, mapping, claims) for o in operands))
        case Or(operands=operands):
            return PredicateOr(tuple(_bind(o, mapping, claims) for o in operands))
        case Not(operand=operand):
            return PredicateNot(_bind(operand, mapping, claims))
        case IsNull(field=name, negated=negated):
            return PredicateIsNull(_column(mapping, name)[0], negated)
        case Comparison(field=name, operator=operator, operand=operand):
            column, field_type = _column(mapping, name)
            value = _operand(operand, field_type, claims)
            return PredicateComparison(column, field_type, operator, (value,))
        case InList(field=name, operands=operands):
            column, field_type = _column(mapping, name)
            values = tuple(_operand(o, field_type, claims) for o in operands)
            return PredicateComparison(column, field_type, Operator.IN, values)
        case InClaim(field=name, claim=claim):
            column, field_type = _column(mapping, name)
            values = coerce_claim_set(claims.get(claim.name), field_type)
            return PredicateComparison(column, field_type, Operator.IN, values)
    raise MissingClaimError  # pragma: no cover — Expression is closed


def _column(mapping: Mapping, name: str) -> tuple[str, FieldType]:
    spec = mapping.field(name)
    if spec is None:
        # Only reachable for a template bound to a mapping it was not parsed against.
        raise MissingClaimError
    return spec.column, spec.type


def _operand(operand: Operand, field_type: FieldType, claims: MappingABC[str, object]) -> Scalar:
    if isinstance(operand, Literal):
        return operand.value
    raw = claims.get(operand.name)
    if isinstance(raw, tuple):
        # A multi-valued claim has no single value to compare with: IN {claim:...} is the
        # explicit form, so nothing is silently picked from the set.
        raise MissingClaimError
    return coerce_claim(raw, field_type)


def coerce_claim_set(value: object, field_type: FieldType) -> tuple[Scalar, ...]:
    """Return a claim used as a set (``IN``) as its values typed for ``field_type``.

    A single-valued claim is a one-element set: IdPs often flatten one group.

    Raises:
        MissingClaimError: the set is empty, holds more than ``MAX_CLAIM_VALUES`` values, or
            any value is refused by ``coerce_claim`` — one unusable value refuses the whole
            claim rather than being skipped, since skipping it would bind a set the identity
            provider never issued.
    """
    items = value if isinstance(value, tuple) else (value,)
    if not items or len(items) > MAX_CLAIM_VALUES:
        raise MissingClaimError
    return tuple(coerce_claim(item, field_type) for item in items)


def coerce_claim(value: object, field_type: FieldType) -> Scalar:
    """Return the claim value typed for ``field_type`` (module docstring: per type).

    Raises:
        MissingClaimError: the value is missing (``None``), empty, padded with whitespace,
            holds a control, format or line-separator character, or does not fit
            ``field_type``.
    """
    integer = isinstance(value, int) and not isinstance(value, bool)
    match field_type:
        case FieldType.TEXT:
            if isinstance(value, str) and _is_exact_text(value):
                return value
            # Within 64 bits, as for the numeric types: an integer of more than 4,300 digits
            # cannot even be written as text (``ValueError``), which must drop the source,
            # not fail the invocation.
            if integer and isinstance(value, int) and _INT_MIN <= value <= _INT_MAX:
                return str(value)
        case FieldType.BOOLEAN:
            if isinstance(value, bool):
                return value
        case FieldType.INTEGER:
            if isinstance(value, str) and _INTEGER_TEXT.fullmatch(value):
                value, integer = int(value), True
            if integer and isinstance(value, int) and _INT_MIN <= value <= _INT_MAX:
                return value
        case FieldType.NUMBER:
            if isinstance(value, str) and _NUMBER_TEXT.fullmatch(value):
                if "." not in value:
                    return int(value)
                number = float(value)
                if Decimal(repr(number)) == Decimal(value):  # the float is the claim itself
                    return number
            if integer and isinstance(value, int) and _INT_MIN <= value <= _INT_MAX:
                return value
        case FieldType.DATE:
            if isinstance(value, str):
                try:
                    return date.fromisoformat(value).isoformat()
                except ValueError:
                    pass
    raise MissingClaimError


def _is_exact_text(text: str) -> bool:
    """Non-empty, unpadded, and free of what collations ignore (module docstring: text)."""
    return bool(text) and text == text.strip() and not _has_ignorable(text)


def _has_ignorable(text: str) -> bool:
    return any(unicodedata.category(ch) in _IGNORABLE_CATEGORIES for ch in text)


def predicate_values(predicate: RecordPredicate) -> tuple[tuple[FieldType, Scalar], ...]:
    """Every value of ``predicate`` with its field type, depth-first, left to right.

    This order is the bind order: a provider names value ``i`` of this tuple ``p{i}``.
    """
    match predicate:
        case PredicateComparison(type=field_type, values=values):
            return tuple((field_type, v) for v in values)
        case PredicateAnd(operands=operands) | PredicateOr(operands=operands):
            return tuple(item for o in operands for item in predicate_values(o))
        case PredicateNot(operand=operand):
            return predicate_values(operand)
    return ()


def predicate_columns(predicate: RecordPredicate) -> tuple[str, ...]:
    """Every physical column ``predicate`` reads, depth-first, duplicates included."""
    match predicate:
        case PredicateComparison(column=column) | PredicateIsNull(column=column):
            return (column,)
        case PredicateAnd(operands=operands) | PredicateOr(operands=operands):
            return tuple(c for o in operands for c in predicate_columns(o))
        case PredicateNot(operand=operand):
            return predicate_columns(operand)
        case _:  # pragma: no cover — RecordPredicate is closed
            assert_never(predicate)


def predicate_shape(predicate: RecordPredicate) -> tuple[object, ...]:
    """The structure that determines command text: nodes, columns, operators, value counts.

    Never a value, so equal shapes share one cached statement whatever the claims were.
    """
    match predicate:
        case PredicateComparison(column=column, type=field_type, operator=op, values=values):
            return ("cmp", column, field_type.value, op.value, len(values))
        case PredicateIsNull(column=column, negated=negated):
            return ("null", column, negated)
        case PredicateAnd(operands=operands):
            return ("and", *(predicate_shape(o) for o in operands))
        case PredicateOr(operands=operands):
            return ("or", *(predicate_shape(o) for o in operands))
        case PredicateNot(operand=operand):
            return ("not", predicate_shape(operand))
        case _:  # pragma: no cover — RecordPredicate is closed
            assert_never(predicate)
