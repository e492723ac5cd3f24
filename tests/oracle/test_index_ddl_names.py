"""The CONTEXT index DDL never lets a configured name out of the PARAMETERS string.

With several searchable columns the index names a ``MULTI_COLUMN_DATASTORE`` preference,
``<index>_DS``, inside ``PARAMETERS ('DATASTORE <preference> SYNC (...)')``: a string literal
Oracle Text then parses as keyword/value pairs, where a name can be neither quoted nor
escaped. A text index named ``idx') PARALLEL 64 --`` closed the literal and added its own
clauses to the DDL an administrator runs; ``idx LEXER x`` added a keyword inside it. No Oracle
runs here: the statements are checked as text.
"""

from __future__ import annotations

import attrs
import pytest

from esra.core.testing.contract import CONTRACT_MAPPING
from esra.oracle._index import text_index_statements


@pytest.mark.parametrize(
    "name",
    [
        "idx') PARALLEL 64 --",
        "my idx LEXER evil_lexer",
        "idx'",
        "idx(x)",
        "i\u2019dx",
        "ïdx",
        "1idx",
    ],
)
def test_a_name_that_is_no_plain_identifier_names_no_preference(name: str) -> None:
    mapping = attrs.evolve(CONTRACT_MAPPING, text_index=name)
    with pytest.raises(ValueError, match="plain identifier"):
        text_index_statements(mapping)


@pytest.mark.parametrize("name", ["idx", "Articles_Idx", "IDX$1", "idx#2"])
def test_a_plain_name_keeps_its_preference(name: str) -> None:
    mapping = attrs.evolve(CONTRACT_MAPPING, text_index=name)
    preference, create = text_index_statements(mapping)
    assert preference.startswith("BEGIN CTX_DDL.CREATE_PREFERENCE('")
    assert create.endswith("_DS SYNC (ON COMMIT)')")
    assert create.count("'") == 2


def test_one_searchable_column_needs_no_preference() -> None:
    """Without a preference the name only ever appears as a quoted identifier."""
    fields = tuple(
        attrs.evolve(f, is_searchable=f.column == "art_title") for f in CONTRACT_MAPPING.fields
    )
    mapping = attrs.evolve(CONTRACT_MAPPING, fields=fields, text_index="idx') x --")
    (create,) = text_index_statements(mapping)
    assert create.startswith('CREATE INDEX "idx\') x --" ON ')
    assert create.endswith("PARAMETERS ('SYNC (ON COMMIT)')")
