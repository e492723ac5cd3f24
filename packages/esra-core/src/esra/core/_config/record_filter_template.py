"""Record-filter templates: a small boolean language over a mapping's business fields.

A template is the record-level predicate an ``ESRA_DATA_MANAGE`` holder writes for a mapping::

    region = {claim:region} OR (owner = {claim:sub} AND NOT archived = TRUE)

It is not SQL and never becomes SQL text. It is checked, tokenized and parsed here into an
immutable expression tree over the mapping's *business* field names; the validator binds that
tree to one caller's claims (``esra.core._record_predicate``) and a provider renders the bound
tree with identifiers from configuration and every value — claim or literal — as a bind
parameter.

Grammar (keywords are case-insensitive, fields and claim names are not)::

    template   := or
    or         := and ("OR" and)*
    and        := unary ("AND" unary)*
    unary      := "NOT" unary | "(" or ")" | predicate
    predicate  := FIELD compare operand
                | FIELD "IN" "(" operand ("," operand)* ")"
                | FIELD "IN" CLAIM                      (a multi-valued claim)
                | FIELD "IS" ["NOT"] "NULL"
    compare    := "=" | "<>" | "!=" | "<" | "<=" | ">" | ">="
    operand    := CLAIM | STRING | INTEGER | DECIMAL | "TRUE" | "FALSE"
    CLAIM      := "{claim:" NAME "}"
    STRING     := "'" ( any character but "'" | "''" )* "'"

Checked before parsing, so a template that looks like an injection attempt is refused whole:
the length cap, control characters, statement separators and comment sequences (also in their
full-width look-alikes), malformed or reserved placeholders and unbalanced parentheses. The
parser then checks that every field exists on the mapping and every literal fits its field's
type. Every failure is a ``ConfigurationError`` naming the problem and where it is.
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from datetime import date
from typing import assert_never

import attrs

from esra.core._config.mapping import FieldSpec, FieldType, Mapping, Operator
from esra.core.exceptions import ConfigurationError

__all__ = [
    "MAX_IN_LITERALS",
    "MAX_NESTING",
    "MAX_TEMPLATE_CHARS",
    "RESERVED_CLAIMS",
    "And",
    "ClaimRef",
    "Comparison",
    "Expression",
    "InClaim",
    "InList",
    "IsNull",
    "Literal",
    "LiteralValue",
    "Not",
    "Operand",
    "Or",
    "RecordFilterTemplate",
    "is_undefined_reserved_claim",
    "parse_record_filter_template",
    "template_of",
]

MAX_TEMPLATE_CHARS = 2000
MAX_IN_LITERALS = 50
MAX_NESTING = 32
# The reserved claims a template may name; every other ``esra.*`` name is refused, so a caller
# can never supply a value for something an author believed ESRA sets. Kept in step with
# ``esra.core._pipeline.validation.TENANT_CLAIM`` (a test asserts it).
RESERVED_CLAIMS = frozenset({"esra.tenant_id"})
_RESERVED_PREFIX = "esra."
_CLAIM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:[.\-][A-Za-z0-9_]+)*")
_MAX_CLAIM_CHARS = 128
# Statement separators and comment introducers of every supported SQL dialect. A template is
# not SQL, so none of these has a meaning in it; refusing them (even inside string literals)
# keeps anything that resembles an injection attempt from ever being published.
_UNSAFE_SEQUENCES = (";", "--", "/*", "*/", "#")
_ALLOWED_CONTROLS = frozenset("\t\n\r")
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cs", "Zl", "Zp"})
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1
_KEYWORDS = frozenset({"AND", "OR", "NOT", "IN", "IS", "NULL", "TRUE", "FALSE"})
_COMPARISONS = {
    "=": Operator.EQ,
    "<>": Operator.NE,
    "!=": Operator.NE,
    "<": Operator.LT,
    "<=": Operator.LTE,
    ">": Operator.GT,
    ">=": Operator.GTE,
}
_ORDERING = frozenset({Operator.LT, Operator.LTE, Operator.GT, Operator.GTE})
_TOKEN = re.compile(
    r"""
      (?P<space>\s+)
    | (?P<claim>\{[^{}]*\})
    | (?P<string>'(?:[^']|'')*')
    | (?P<number>-?[0-9]+(?:\.[0-9]+)?)
    | (?P<op><>|!=|<=|>=|=|<|>)
    | (?P<lparen>\()
    | (?P<rparen>\))
    | (?P<comma>,)
    | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
    """,
    re.VERBOSE,
)

LiteralValue = str | int | float | bool


@attrs.frozen
class ClaimRef:
    """A ``{claim:NAME}`` placeholder: the caller's claim ``name``, bound at validation."""

    name: str


@attrs.frozen
class Literal:
    """A constant from the template, already typed for its field; still sent as a bind."""

    value: LiteralValue


Operand = ClaimRef | Literal


@attrs.frozen
class Comparison:
    """``field <operator> operand``; ``operator`` is never ``IN``."""

    field: str
    operator: Operator
    operand: Operand


@attrs.frozen
class InList:
    """``field IN (operand, ...)``: one to ``MAX_IN_LITERALS`` operands."""

    field: str
    operands: tuple[Operand, ...]


@attrs.frozen
class InClaim:
    """``field IN {claim:NAME}``: membership in a multi-valued claim (a group list)."""

    field: str
    claim: ClaimRef


@attrs.frozen
class IsNull:
    """``field IS NULL`` (or ``IS NOT NULL`` when ``negated``)."""

    field: str
    negated: bool = False


@attrs.frozen
class And:
    """Every operand holds (two or more)."""

    operands: tuple[Expression, ...]


@attrs.frozen
class Or:
    """At least one operand holds (two or more)."""

    operands: tuple[Expression, ...]


@attrs.frozen
class Not:
    """The operand does not hold (SQL three-valued logic: NOT of unknown stays unknown)."""

    operand: Expression


Expression = Comparison | InList | InClaim | IsNull | And | Or | Not


@attrs.frozen
class RecordFilterTemplate:
    """A parsed, checked template: its source text and its expression tree."""

    text: str
    expression: Expression

    @property
    def claims(self) -> frozenset[str]:
        """Every claim name a placeholder of the template refers to."""
        return frozenset(_claims(self.expression))


def _claims(expression: Expression) -> list[str]:
    match expression:
        case Comparison(operand=ClaimRef(name=name)) | InClaim(claim=ClaimRef(name=name)):
            return [name]
        case InList(operands=operands):
            return [o.name for o in operands if isinstance(o, ClaimRef)]
        case And(operands=operands) | Or(operands=operands):
            return [name for operand in operands for name in _claims(operand)]
        case Not(operand=operand):
            return _claims(operand)
    return []


@functools.lru_cache(maxsize=256)
def template_of(mapping: Mapping) -> RecordFilterTemplate | None:
    """Return ``mapping``'s parsed record-filter template (cached), or ``None`` if it has none.

    Raises:
        ConfigurationError: the template is invalid (a snapshot never holds such a mapping).
    """
    if mapping.record_filter_template is None:
        return None
    return parse_record_filter_template(mapping.record_filter_template, mapping)


def parse_record_filter_template(text: str, mapping: Mapping) -> RecordFilterTemplate:
    """Check and parse ``text`` as a record-filter template over ``mapping``'s fields.

    Raises:
        ConfigurationError: naming the first problem found and its position, e.g. a separator
            or comment sequence, unbalanced parentheses, a malformed or reserved placeholder,
            an unknown field, or a literal that does not fit its field's type.
    """
    prefix = f"mapping {mapping.id!r}: record-filter template"
    try:
        if not isinstance(text, str):
            raise _TemplateError("must be a string", None)
        _check_text(text)
        tokens = _tokenize(text)
        _check_parentheses(tokens)
        expression = _Parser(tokens, mapping).parse()
    except _TemplateError as exc:
        where = "" if exc.position is None else f" at position {exc.position}"
        raise ConfigurationError(f"{prefix}: {exc.problem}{where}") from None
    return RecordFilterTemplate(text=text, expression=expression)


class _TemplateError(Exception):
    """One problem with a template; turned into a ``ConfigurationError`` by the entry point."""

    def __init__(self, problem: str, position: int | None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.position = position


def _shown(text: str) -> str:
    # Messages reach an administrator and the audit log: quote a token, never at length.
    return repr(text if len(text) <= 32 else text[:29] + "...")


def _check_text(text: str) -> None:
    if not text.strip():
        raise _TemplateError("is empty", None)
    if len(text) > MAX_TEMPLATE_CHARS:
        raise _TemplateError(f"is longer than {MAX_TEMPLATE_CHARS} characters", None)
    for index, char in enumerate(text):
        if char not in _ALLOWED_CONTROLS and unicodedata.category(char) in _UNSAFE_CATEGORIES:
            raise _TemplateError(f"contains control character U+{ord(char):04X}", index)
    # The compatibility form too: full-width look-alikes (U+FF1B, U+FF0F U+FF0A) fold to the
    # ASCII sequences under some collations and normalisers.
    for candidate in (text, unicodedata.normalize("NFKC", text)):
        for sequence in _UNSAFE_SEQUENCES:
            index = candidate.find(sequence)
            if index >= 0:
                kind = "statement separator" if sequence == ";" else "comment sequence"
                position = index if candidate is text else None
                raise _TemplateError(f"contains the {kind} {sequence!r}", position)


@attrs.frozen
class _Token:
    kind: str
    text: str
    position: int

    @property
    def keyword(self) -> str | None:
        upper = self.text.upper()
        return upper if self.kind == "word" and upper in _KEYWORDS else None


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            char = text[position]
            if char == "'":
                raise _TemplateError("has an unterminated string literal", position)
            if char in "{}":
                raise _TemplateError(f"has a malformed placeholder near {char!r}", position)
            raise _TemplateError(f"has an unexpected character {char!r}", position)
        kind = match.lastgroup or ""
        if kind != "space":
            token = _Token(kind, match.group(), position)
            if kind == "claim":
                _check_placeholder(token)
            elif kind == "string" and ("{" in token.text or "}" in token.text):
                # A placeholder inside quotes would be compared as text, never bound:
                # refuse what an author almost certainly meant as a placeholder.
                raise _TemplateError("has a brace inside a string literal", position)
            tokens.append(token)
        position = match.end()
    tokens.append(_Token("end", "", len(text)))
    return tokens


def is_undefined_reserved_claim(name: str) -> bool:
    """Whether ``name`` is under the reserved ``esra.`` prefix, in any case, without being a
    claim the core defines (``RESERVED_CLAIMS``). The host strips only lower-case ``esra.``
    claims from a token, so a filter on ``ESRA.subject`` would bind what the caller sent."""
    return name.lower().startswith(_RESERVED_PREFIX) and name not in RESERVED_CLAIMS


def _check_placeholder(token: _Token) -> None:
    body = token.text[1:-1]
    namespace, colon, name = body.partition(":")
    if namespace != "claim" or not colon:
        raise _TemplateError(
            f"has a malformed placeholder {_shown(token.text)} (expected {{claim:NAME}})",
            token.position,
        )
    if len(name) > _MAX_CLAIM_CHARS or not _CLAIM_NAME.fullmatch(name):
        raise _TemplateError(
            f"has a placeholder with an invalid claim name {_shown(name)}", token.position
        )
    if is_undefined_reserved_claim(name):
        allowed = ", ".join(sorted(RESERVED_CLAIMS))
        raise _TemplateError(
            f"names the reserved claim {_shown(name)} (only {allowed} is defined)",
            token.position,
        )


def _check_parentheses(tokens: list[_Token]) -> None:
    open_positions: list[int] = []
    for token in tokens:
        if token.kind == "lparen":
            open_positions.append(token.position)
        elif token.kind == "rparen":
            if not open_positions:
                raise _TemplateError("has unbalanced parentheses: ')' without '('", token.position)
            open_positions.pop()
    if open_positions:
        raise _TemplateError("has unbalanced parentheses: '(' never closed", open_positions[-1])


class _Parser:
    """Recursive descent over the token list; one method per grammar rule."""

    def __init__(self, tokens: list[_Token], mapping: Mapping) -> None:
        self._tokens = tokens
        self._index = 0
        self._mapping = mapping
        self._depth = 0

    def parse(self) -> Expression:
        expression = self._or()
        token = self._peek()
        if token.kind != "end":
            raise self._unexpected(token, "AND, OR or the end of the template")
        return expression

    def _peek(self) -> _Token:
        return self._tokens[self._index]

    def _advance(self) -> _Token:
        token = self._tokens[self._index]
        if token.kind != "end":
            self._index += 1
        return token

    def _accept_keyword(self, keyword: str) -> bool:
        if self._peek().keyword == keyword:
            self._advance()
            return True
        return False

    def _expect(self, kind: str, what: str) -> _Token:
        token = self._advance()
        if token.kind != kind:
            raise self._unexpected(token, what)
        return token

    @staticmethod
    def _unexpected(token: _Token, expected: str) -> _TemplateError:
        found = "the end of the template" if token.kind == "end" else _shown(token.text)
        return _TemplateError(f"expected {expected} but found {found}", token.position)

    def _nest(self, token: _Token) -> None:
        self._depth += 1
        if self._depth > MAX_NESTING:
            raise _TemplateError(f"nests deeper than {MAX_NESTING} levels", token.position)

    def _or(self) -> Expression:
        operands = [self._and()]
        while self._accept_keyword("OR"):
            operands.append(self._and())
        return operands[0] if len(operands) == 1 else Or(tuple(operands))

    def _and(self) -> Expression:
        operands = [self._unary()]
        while self._accept_keyword("AND"):
            operands.append(self._unary())
        return operands[0] if len(operands) == 1 else And(tuple(operands))

    def _unary(self) -> Expression:
        token = self._peek()
        if token.keyword == "NOT" or token.kind == "lparen":
            self._nest(token)
            self._advance()
            if token.kind == "lparen":
                inner = self._or()
                self._expect("rparen", "')'")
            else:
                inner = Not(self._unary())
            self._depth -= 1
            return inner
        return self._predicate()

    def _predicate(self) -> Expression:
        token = self._advance()
        if token.kind != "word" or token.keyword is not None:
            raise self._unexpected(token, "a field name, NOT or '('")
        spec = self._mapping.field(token.text)
        if spec is None:
            raise _TemplateError(f"names an unknown field {_shown(token.text)}", token.position)
        follow = self._peek()
        if follow.kind == "op":
            self._advance()
            operator = _COMPARISONS[follow.text]
            if operator in _ORDERING and spec.type is FieldType.BOOLEAN:
                raise _TemplateError(
                    f"orders the boolean field {_shown(spec.name)} with {follow.text!r}",
                    follow.position,
                )
            return Comparison(spec.name, operator, self._operand(spec))
        if self._accept_keyword("IN"):
            return self._membership(spec)
        if self._accept_keyword("IS"):
            negated = self._accept_keyword("NOT")
            null = self._advance()
            if null.keyword != "NULL":
                raise self._unexpected(null, "NULL")
            return IsNull(spec.name, negated)
        raise self._unexpected(follow, "a comparison operator, IN or IS")

    def _membership(self, spec: FieldSpec) -> Expression:
        token = self._peek()
        if token.kind == "claim":
            self._advance()
            return InClaim(spec.name, ClaimRef(_claim_name(token)))
        self._expect("lparen", "'(' or a placeholder after IN")
        operands = [self._operand(spec)]
        while self._peek().kind == "comma":
            self._advance()
            operands.append(self._operand(spec))
        if len(operands) > MAX_IN_LITERALS:
            raise _TemplateError(
                f"lists more than {MAX_IN_LITERALS} values after IN", token.position
            )
        self._expect("rparen", "',' or ')'")
        return InList(spec.name, tuple(operands))

    def _operand(self, spec: FieldSpec) -> Operand:
        token = self._advance()
        if token.kind == "claim":
            return ClaimRef(_claim_name(token))
        value = _literal(token)
        if value is None:
            raise self._unexpected(token, "a placeholder or a literal")
        typed = _fit(value, spec.type)
        if typed is None:
            raise _TemplateError(
                f"compares the {spec.type.value} field {_shown(spec.name)} "
                f"with the literal {_shown(token.text)}",
                token.position,
            )
        return Literal(typed)


def _claim_name(token: _Token) -> str:
    return token.text[1:-1].partition(":")[2]


def _literal(token: _Token) -> LiteralValue | None:
    if token.kind == "string":
        return token.text[1:-1].replace("''", "'")
    if token.kind == "number":
        return float(token.text) if "." in token.text else int(token.text)
    if token.keyword in ("TRUE", "FALSE"):
        return token.keyword == "TRUE"
    return None


def _fit(value: LiteralValue, field_type: FieldType) -> LiteralValue | None:
    """Return the literal typed for ``field_type``, or ``None`` when it does not fit."""
    match field_type:
        case FieldType.TEXT:
            return value if isinstance(value, str) else None
        case FieldType.BOOLEAN:
            return value if isinstance(value, bool) else None
        case FieldType.INTEGER:
            if isinstance(value, bool) or not isinstance(value, int):
                return None
            return value if _INT_MIN <= value <= _INT_MAX else None
        case FieldType.NUMBER:
            if isinstance(value, bool) or not isinstance(value, int | float):
                return None
            if isinstance(value, int):
                return value if _INT_MIN <= value <= _INT_MAX else None
            return value if math.isfinite(value) else None
        case FieldType.DATE:
            if not isinstance(value, str):
                return None
            try:
                return date.fromisoformat(value).isoformat()
            except ValueError:
                return None
        case _:  # pragma: no cover — FieldType is closed
            assert_never(field_type)
