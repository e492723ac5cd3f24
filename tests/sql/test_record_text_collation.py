"""Record-level security compares text under the builder's ``record_text_collation``.

MySQL/MariaDB columns usually carry a case-, accent- and width-insensitive collation, under
which a claim ``EMEA`` matched rows of ``emea`` (a hostile review's finding; the live proof is
``tests/mysql/test_record_security_compares_exactly.py``). The builder compares record text
under the collation it is given, beside the column's own comparison for ``=`` and ``IN`` so
an index still narrows the rows; other types, caller filters and engines without the option
render as before.
"""

from __future__ import annotations

from sqlalchemy.dialects import mysql

from esra.core._config.mapping import FieldType, Operator
from esra.core._query import ResolvedFilter
from esra.sql import CompiledStatementCache, StatementBuilder
from tests._injection import issue
from tests.sql.conftest import PlainFullText

DIALECT = mysql.dialect(paramstyle="pyformat")


def _sql(*record_filters: ResolvedFilter, collation: str | None = "utf8mb4_bin") -> str:
    builder = StatementBuilder(
        DIALECT, PlainFullText(), cache=CompiledStatementCache(0), record_text_collation=collation
    )
    query = issue(
        record_filters=record_filters,
        filters=(ResolvedFilter("art_category", FieldType.TEXT, Operator.EQ, ("news",)),),
    )
    return builder.build(query).sql


def test_a_text_record_filter_is_compared_exactly_beside_the_columns_comparison() -> None:
    sql = _sql(ResolvedFilter("art_org", FieldType.TEXT, Operator.EQ, ("acme",)))
    assert "b.art_org = %(r0_0)s AND b.art_org = (%(r0_0)s COLLATE utf8mb4_bin)" in sql
    assert "b.art_category = %(f0_0)s" in sql  # a caller's filter only narrows: unchanged
    assert sql.count("COLLATE") == 1


def test_an_in_list_and_an_ordering_are_exact_too() -> None:
    sql = _sql(
        ResolvedFilter("art_org", FieldType.TEXT, Operator.IN, ("acme", "globex")),
        ResolvedFilter("art_region", FieldType.TEXT, Operator.LT, ("m",)),
    )
    assert "(%(r0_0)s COLLATE utf8mb4_bin, %(r0_1)s COLLATE utf8mb4_bin)" in sql
    assert "b.art_region < (%(r1_0)s COLLATE utf8mb4_bin)" in sql
    assert "b.art_region < %(r1_0)s AND" not in sql


def test_other_types_and_builders_without_the_option_are_unchanged() -> None:
    year = ResolvedFilter("art_year", FieldType.INTEGER, Operator.EQ, (2024,))
    assert "COLLATE" not in _sql(year)
    org = ResolvedFilter("art_org", FieldType.TEXT, Operator.EQ, ("acme",))
    assert "COLLATE" not in _sql(org, collation=None)
