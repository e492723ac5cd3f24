"""A configured name Oracle cannot have is refused, never re-quoted into other SQL.

No Oracle identifier, quoted or not, holds a double quote or a NUL (DIA-25716): a ``"``
only ever delimits one, and Oracle has no escape for it. SQLAlchemy's ``oracle`` quoter
doubles it as standard SQL would, so ``hr" "x`` reached Oracle as ``"hr"" ""x"``, which
Oracle reads as three adjacent identifiers ``"hr" " " "x"`` — a statement other than the
one the mapping describes. Every other character stays inside one delimited identifier.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from esra.core._config.mapping import FieldType, Mapping, Operator
from esra.core._query import ResolvedFilter
from esra.core.codes import ProviderErrorCode
from esra.core.exceptions import ProviderError
from esra.core.testing.contract import CONTRACT_MAPPING
from esra.oracle import text_index_statements
from tests.oracle.conftest import issue, provider, uncached_builder

UNNAMEABLE = ('hr" "x', 'hr"', "hr\x00x")
# Everything a careless quoter turns into SQL structure, except the two Oracle forbids.
NAMEABLE = "a.b; DROP TABLE x --'`]) OR 1=1 é"


def _mapping_with(part: str, name: str) -> Mapping:
    changes: dict[str, Any] = {part: name}
    return attrs.evolve(CONTRACT_MAPPING, **changes)


def _filter_on(column: str) -> ResolvedFilter:
    return ResolvedFilter(column, FieldType.TEXT, Operator.EQ, ("energy",))


def _queries(name: str) -> dict[str, Any]:
    return {
        "schema": issue(mapping=_mapping_with("schema", name)),
        "relation": issue(mapping=_mapping_with("relation", name)),
        "record key": issue(mapping=_mapping_with("record_key", name)),
        "filter column": issue(filters=(_filter_on(name),)),
    }


@pytest.mark.parametrize("name", UNNAMEABLE)
@pytest.mark.parametrize("part", ["schema", "relation", "record key", "filter column"])
def test_a_name_oracle_cannot_have_is_refused_as_relation_not_found(part: str, name: str) -> None:
    """Refused while the statement is built, classified as Oracle classifies an invalid
    identifier (ORA-00904); the name itself stays out of the error."""
    with pytest.raises(ProviderError) as raised:
        uncached_builder().build(_queries(name)[part])
    assert raised.value.code is ProviderErrorCode.RELATION_NOT_FOUND
    assert name not in str(raised.value)


@pytest.mark.parametrize("part", ["schema", "relation", "record key", "filter column"])
def test_every_other_character_stays_inside_one_quoted_identifier(part: str) -> None:
    """Brackets, backticks, quotes, dots, separators and comments are one ``"…"`` token."""
    sql = uncached_builder().build(_queries(NAMEABLE)[part]).sql
    assert f'"{NAMEABLE}"' in sql
    assert sql.count("DROP TABLE") == sql.count(f'"{NAMEABLE}"')


async def test_execution_refuses_before_any_connection() -> None:
    """Nothing listens on the provider's port: the refusal comes first, not CONNECTION_REFUSED."""
    oracle = provider()
    try:
        with pytest.raises(ProviderError) as raised:
            await oracle.execute(issue(mapping=_mapping_with("schema", 'hr" "x')), timeout_s=5)
        assert raised.value.code is ProviderErrorCode.RELATION_NOT_FOUND
    finally:
        await oracle.close()


def test_operator_explain_refuses_too() -> None:
    """The rendered statement an operator inspects is built by the same quoter."""
    with pytest.raises(ProviderError) as raised:
        provider().render_statement(issue(mapping=_mapping_with("relation", 'docs" "x')))
    assert raised.value.code is ProviderErrorCode.RELATION_NOT_FOUND


@pytest.mark.parametrize("part", ["schema", "relation", "text_index"])
def test_the_text_index_ddl_refuses_too(part: str) -> None:
    """The CONTEXT index DDL quotes with the same rule: no ``"`` reaches it re-quoted."""
    with pytest.raises(ProviderError) as raised:
        text_index_statements(_mapping_with(part, 'docs" "x'))
    assert raised.value.code is ProviderErrorCode.RELATION_NOT_FOUND
