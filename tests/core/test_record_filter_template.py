"""The record-filter template language: what parses, into what tree, and everything refused."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from esra.core._config.mapping import Operator
from esra.core._config.record_filter_template import (
    MAX_IN_LITERALS,
    MAX_NESTING,
    MAX_TEMPLATE_CHARS,
    RESERVED_CLAIMS,
    And,
    ClaimRef,
    Comparison,
    InClaim,
    InList,
    IsNull,
    Literal,
    Not,
    Or,
    template_of,
)
from esra.core._pipeline.validation import TENANT_CLAIM
from esra.core.codes import ErrorCode
from esra.core.config import (
    ConfigSnapshot,
    FieldType,
    Mapping,
    dump_snapshot,
    load_snapshot,
    parse_record_filter_template,
)
from esra.core.exceptions import ConfigurationError
from tests.core.factories import make_field, make_mapping, make_snapshot, make_source

EXAMPLE = "region = {claim:region} OR (owner = {claim:sub} AND NOT archived = TRUE)"


def _mapping(template: str | None = None) -> Mapping:
    """Fields of every type; ``owner`` is restricted (a security column)."""
    return make_mapping(
        fields=(
            make_field("title"),
            make_field("body"),
            make_field("region"),
            make_field("owner", restricted=True, returnable=False),
            make_field("archived", type=FieldType.BOOLEAN),
            make_field("level", type=FieldType.INTEGER),
            make_field("score", type=FieldType.NUMBER),
            make_field("since", type=FieldType.DATE),
        ),
        record_filter_template=template,
    )


def _parse(text: str) -> Any:
    return parse_record_filter_template(text, _mapping()).expression


def _refusal(text: Any) -> str:
    with pytest.raises(ConfigurationError) as raised:
        parse_record_filter_template(text, _mapping())
    assert raised.value.code is ErrorCode.ESRA_CONFIGURATION_INVALID
    message = str(raised.value)
    assert message.startswith("mapping 'm-1': record-filter template")
    return message


# --- what parses ---------------------------------------------------------------------------


def test_the_example_parses_into_the_expected_tree() -> None:
    """OR of a claim comparison and an AND whose NOT wraps a boolean literal comparison."""
    template = parse_record_filter_template(EXAMPLE, _mapping())
    assert template.text == EXAMPLE
    assert template.expression == Or(
        (
            Comparison("region", Operator.EQ, ClaimRef("region")),
            And(
                (
                    Comparison("owner", Operator.EQ, ClaimRef("sub")),
                    Not(Comparison("archived", Operator.EQ, Literal(True))),
                )
            ),
        )
    )
    assert template.claims == frozenset({"region", "sub"})


def test_and_binds_tighter_than_or_and_not_tighter_than_and() -> None:
    """``a OR b AND NOT c`` is ``a OR (b AND (NOT c))``; chains are flattened."""
    tree = _parse("level = 1 OR level = 2 AND NOT level = 3 OR level = 4")
    assert tree == Or(
        (
            Comparison("level", Operator.EQ, Literal(1)),
            And(
                (
                    Comparison("level", Operator.EQ, Literal(2)),
                    Not(Comparison("level", Operator.EQ, Literal(3))),
                )
            ),
            Comparison("level", Operator.EQ, Literal(4)),
        )
    )


def test_parentheses_override_precedence() -> None:
    """``(a OR b) AND c`` keeps the OR inside the AND."""
    tree = _parse("(level = 1 OR level = 2) AND region = 'x'")
    assert isinstance(tree, And)
    assert isinstance(tree.operands[0], Or)


def test_keywords_are_case_insensitive_and_whitespace_is_free() -> None:
    """``and``/``Or``/``not``/``true`` read as keywords; newlines and tabs are whitespace."""
    assert _parse("region={claim:r}\n\tor NOT archived = true") == _parse(
        "region = {claim:r} OR NOT archived = TRUE"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("level = -42", Comparison("level", Operator.EQ, Literal(-42))),
        ("score >= 1.5", Comparison("score", Operator.GTE, Literal(1.5))),
        ("score < 3", Comparison("score", Operator.LT, Literal(3))),
        ("region <> 'it''s'", Comparison("region", Operator.NE, Literal("it's"))),
        ("region != 'x'", Comparison("region", Operator.NE, Literal("x"))),
        ("since > '2024-01-31'", Comparison("since", Operator.GT, Literal("2024-01-31"))),
        ("since <= '20240131'", Comparison("since", Operator.LTE, Literal("2024-01-31"))),
        ("archived = FALSE", Comparison("archived", Operator.EQ, Literal(False))),
        ("level <= {claim:clearance}", Comparison("level", Operator.LTE, ClaimRef("clearance"))),
    ],
)
def test_literals_are_typed_for_their_field(text: str, expected: Comparison) -> None:
    """Every literal kind is parsed to the field's type (dates in their canonical form)."""
    assert _parse(text) == expected


def test_in_lists_mix_literals_and_placeholders() -> None:
    """``IN (...)`` takes literals and placeholders together."""
    assert _parse("region IN ('emea', {claim:home}, 'apac')") == InList(
        "region", (Literal("emea"), ClaimRef("home"), Literal("apac"))
    )


def test_in_a_claim_is_membership_in_a_multi_valued_claim() -> None:
    """``IN {claim:groups}`` names a tuple-valued claim."""
    assert _parse("owner IN {claim:groups}") == InClaim("owner", ClaimRef("groups"))


def test_null_tests() -> None:
    """``IS NULL`` and ``IS NOT NULL``."""
    assert _parse("region IS NULL") == IsNull("region", negated=False)
    assert _parse("region is not null") == IsNull("region", negated=True)


def test_claim_names_may_be_dotted_or_dashed() -> None:
    """Namespaced IdP claims such as ``org.unit`` or ``x-dept`` are placeholders too."""
    template = parse_record_filter_template(
        "region = {claim:org.unit} AND owner = {claim:x-dept_2}", _mapping()
    )
    assert template.claims == frozenset({"org.unit", "x-dept_2"})


def test_the_reserved_tenant_claim_is_allowed() -> None:
    """``{claim:esra.tenant_id}`` is the one reserved claim; it is the validator's."""
    assert frozenset({TENANT_CLAIM}) == RESERVED_CLAIMS
    template = parse_record_filter_template("owner = {claim:esra.tenant_id}", _mapping())
    assert template.claims == {TENANT_CLAIM}


def test_restricted_fields_may_be_referenced() -> None:
    """Security columns are usually restricted: a template may still filter on them."""
    assert _parse("owner = {claim:sub}") == Comparison("owner", Operator.EQ, ClaimRef("sub"))


def test_template_of_parses_once_per_mapping() -> None:
    """The validator's lookup is cached and returns None for a mapping without a template."""
    mapping = _mapping(EXAMPLE)
    assert template_of(mapping) is template_of(mapping)
    assert template_of(_mapping()) is None


# --- what is refused -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        # statement separators and comment sequences, anywhere (even in a literal)
        ("region = {claim:r}; DROP TABLE t", "statement separator ';' at position 18"),
        ("region = 'a;b'", "statement separator"),
        ("region = {claim:r} -- bypass", "comment sequence '--' at position 19"),
        ("region = {claim:r} /* x */", "comment sequence '/*'"),
        ("region = 'x */'", "comment sequence '*/'"),
        ("region = {claim:r} # x", "comment sequence '#'"),
        ("level = --1", "comment sequence '--'"),
        ("region = 'a\uff1bb'", "statement separator ';'"),
        ("region = 'a\uff0f\uff0ab'", "comment sequence '/*'"),
        # control characters
        ("region = 'a\x00'", "control character U+0000 at position 11"),
        ("region = 'a\u2028'", "control character U+2028"),
        # parentheses
        ("(region = {claim:r}", "unbalanced parentheses: '(' never closed at position 0"),
        ("region = {claim:r})", "unbalanced parentheses: ')' without '(' at position 18"),
        ("((level = 1) OR (level = 2)", "unbalanced parentheses"),
        # placeholders
        ("region = {claim:}", "invalid claim name ''"),
        ("region = {claim:a b}", "invalid claim name 'a b'"),
        ("region = {claim:a..b}", "invalid claim name"),
        ("region = {claim:1st}", "invalid claim name"),
        ("region = {user:name}", "malformed placeholder '{user:name}'"),
        ("region = {claim}", "malformed placeholder"),
        ("region = {claim:r", "malformed placeholder"),
        ("region = claim:r}", "unexpected character ':' at position 14"),
        ("region = r}", "malformed placeholder near '}' at position 10"),
        ("region = {{claim:r}}", "malformed placeholder"),
        ("region = {claim:" + "a" * 129 + "}", "invalid claim name"),
        ("owner = {claim:esra.subject}", "reserved claim 'esra.subject'"),
        ("owner = {claim:ESRA.tenant_id}", "reserved claim 'ESRA.tenant_id'"),
        ("region = '{claim:r}'", "brace inside a string literal"),
        # fields
        ("regoin = {claim:r}", "unknown field 'regoin' at position 0"),
        ("col_region = {claim:r}", "unknown field 'col_region'"),
        ("AND = 1", "expected a field name, NOT or '('"),
        ("{claim:r} = region", "expected a field name, NOT or '(' but found '{claim:r}'"),
        # operand types
        ("region = 1", "compares the text field 'region' with the literal '1'"),
        ("level = '1'", "compares the integer field 'level'"),
        ("level = 1.5", "compares the integer field 'level'"),
        ("level = TRUE", "compares the integer field 'level'"),
        ("level = 9223372036854775808", "compares the integer field 'level'"),
        ("score = 'x'", "compares the number field 'score'"),
        ("archived = 'true'", "compares the boolean field 'archived'"),
        ("archived = 1", "compares the boolean field 'archived'"),
        ("since = '2024-02-30'", "compares the date field 'since'"),
        ("since = 20240101", "compares the date field 'since'"),
        ("region IN ('a', 2)", "compares the text field 'region' with the literal '2'"),
        ("archived < TRUE", "orders the boolean field 'archived' with '<'"),
        # structure
        ("region", "expected a comparison operator, IN or IS"),
        ("region =", "expected a placeholder or a literal but found the end"),
        ("region = = 'a'", "expected a placeholder or a literal but found '='"),
        ("region IN ()", "expected a placeholder or a literal but found ')'"),
        ("region IN 'a'", "expected '(' or a placeholder after IN"),
        ("region IN ('a' 'b')", "expected ',' or ')'"),
        ("region IS 'a'", "expected NULL"),
        ("region = 'a' region = 'b'", "expected AND, OR or the end of the template"),
        ("region = 'a' AND", "found the end of the template"),
        ("NOT", "found the end of the template"),
        ("()", "expected a field name"),
        ("region = 'unterminated", "unterminated string literal at position 9"),
        ("region = 'a' @ 'b'", "unexpected character '@'"),
        ("region = `a`", "unexpected character '`'"),
        ('region = "a"', "unexpected character '\"'"),
        ("level = 1.", "unexpected character '.'"),
        ("", "is empty"),
        ("   \n ", "is empty"),
    ],
)
def test_hostile_and_malformed_templates_are_refused(text: str, fragment: str) -> None:
    """Each rule refuses with a message naming the problem (and its position when known)."""
    assert fragment in _refusal(text)


def test_a_template_longer_than_the_cap_is_refused() -> None:
    """The length cap applies before anything else is looked at."""
    text = "(" + " OR ".join(f"level = {i}" for i in range(400)) + ")"
    assert len(text) > MAX_TEMPLATE_CHARS
    assert f"longer than {MAX_TEMPLATE_CHARS} characters" in _refusal(text)


def test_nesting_deeper_than_the_cap_is_refused() -> None:
    """Deep nesting is refused, never a RecursionError."""
    deep = "(" * (MAX_NESTING + 1) + "level = 1" + ")" * (MAX_NESTING + 1)
    assert f"nests deeper than {MAX_NESTING} levels" in _refusal(deep)
    assert "nests deeper" in _refusal("NOT " * (MAX_NESTING + 1) + "level = 1")
    shallow = "(" * MAX_NESTING + "level = 1" + ")" * MAX_NESTING
    assert _parse(shallow) == Comparison("level", Operator.EQ, Literal(1))


def test_in_lists_are_capped() -> None:
    """At most MAX_IN_LITERALS operands after IN."""
    ok = ", ".join(str(i) for i in range(MAX_IN_LITERALS))
    assert isinstance(_parse(f"level IN ({ok})"), InList)
    assert "more than" in _refusal(f"level IN ({ok}, 99)")


def test_a_non_string_template_is_refused() -> None:
    """A template that is not text is a configuration error, not a TypeError."""
    assert "must be a string" in _refusal(42)


def test_long_tokens_are_quoted_briefly_in_messages() -> None:
    """A message quotes at most a short prefix of an offending token."""
    message = _refusal("region = 1 OR " + "x" * 500 + " = 'a'")
    assert "x" * 40 not in message


@settings(max_examples=300, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from(list("regionlvArchvd ()'{}:;-=<>!,.#/*\n0123456789ANDORNTISUL")),
        max_size=80,
    )
)
def test_arbitrary_text_either_parses_or_is_a_configuration_error(text: str) -> None:
    """No input makes the parser fail any other way (no IndexError, no RecursionError)."""
    try:
        parse_record_filter_template(text, _mapping())
    except ConfigurationError as exc:
        message = str(exc)
    else:
        return
    assert message.startswith("mapping 'm-1': record-filter template")


# --- where templates are checked -----------------------------------------------------------


def _snapshot(template: str) -> ConfigSnapshot:
    return make_snapshot([make_source("s-1")], mappings=[_mapping(template)])


def test_a_snapshot_with_an_invalid_template_cannot_exist() -> None:
    """Construction parses every template: a snapshot that exists has only valid ones."""
    with pytest.raises(ConfigurationError, match="unknown field 'nope'"):
        _snapshot("nope = {claim:x}")


def test_a_valid_template_round_trips_through_import_and_export() -> None:
    """The template is part of the versioned configuration document."""
    snapshot = _snapshot(EXAMPLE)
    document = dump_snapshot(snapshot)
    assert document["mappings"][0]["record_filter_template"] == EXAMPLE
    assert load_snapshot(document) == snapshot


def test_loading_a_document_with_a_hostile_template_is_refused() -> None:
    """``load_snapshot`` surfaces the template's problem as a ConfigurationError."""
    document = dump_snapshot(_snapshot(EXAMPLE))
    document["mappings"][0]["record_filter_template"] = "region = 'a'; DELETE FROM t"
    with pytest.raises(ConfigurationError, match="statement separator"):
        load_snapshot(document)


def test_a_template_is_checked_against_its_own_mapping() -> None:
    """A field of another mapping is unknown here."""
    mapping = attrs.evolve(_mapping(), fields=_mapping().fields[:2])
    with pytest.raises(ConfigurationError, match="unknown field 'region'"):
        parse_record_filter_template("region = 'a'", mapping)
