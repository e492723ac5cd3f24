"""Create the FULLTEXT index a mapping is searched through.

MySQL and MariaDB match ``MATCH(cols)`` only against a FULLTEXT index over exactly that
column list, so the index covers the mapping's searchable columns (its title and content
fields when none is marked), in configuration order — the order the provider's MATCH uses —
and is named by ``Mapping.text_index``. InnoDB indexes words of ``innodb_ft_min_token_size``
(default 3) to ``innodb_ft_max_token_size`` characters and skips the stopwords in effect when
the index is built.

This is administration: run it over a connection of your own that may alter the table; the
provider itself only ever reads. Identifiers come from configuration and are quoted by
SQLAlchemy's MySQL quoter (backticks doubled). The statement carries no value and is executed
without arguments, so no DB-API driver %-formats it: mysql-connector-python's and PyMySQL's
connections both send it as written.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from esra.core.config import Mapping
from esra.mysql._quote import quote_identifier

__all__ = ["create_fulltext_index", "fulltext_index_columns", "fulltext_index_statement"]


def fulltext_index_columns(mapping: Mapping) -> tuple[str, ...]:
    """Return the physical columns to index: searchable fields, else title and content.

    This is the column list (and order) the provider's ``MATCH`` names.

    Raises:
        ValueError: if the mapping has no column to index.
    """
    marked = [f.column for f in mapping.fields if f.is_searchable]
    if not marked:
        named = (mapping.field(n) for n in (mapping.title_field, *mapping.content_fields))
        marked = [f.column for f in named if f is not None]
    if not marked:
        msg = "the mapping has no column to index"
        raise ValueError(msg)
    return tuple(dict.fromkeys(marked))


def fulltext_index_statement(mapping: Mapping, *, columns: Sequence[str] | None = None) -> str:
    """Return ``ALTER TABLE ... ADD FULLTEXT INDEX <text_index> (<columns>)`` for ``mapping``.

    Raises:
        ValueError: if the mapping names no text index or has nothing to index.
    """
    if not mapping.text_index:
        msg = "the mapping names no text index"
        raise ValueError(msg)
    cols = tuple(columns) if columns is not None else fulltext_index_columns(mapping)
    table = quote_identifier(mapping.relation)
    if mapping.schema:
        table = f"{quote_identifier(mapping.schema)}.{table}"
    col_list = ", ".join(quote_identifier(c) for c in cols)
    index = quote_identifier(mapping.text_index)
    return f"ALTER TABLE {table} ADD FULLTEXT INDEX {index} ({col_list})"


def create_fulltext_index(
    connection: Any, mapping: Mapping, *, columns: Sequence[str] | None = None
) -> None:
    """Create ``mapping.text_index`` on the mapping's table over a DB-API ``connection``
    (mysql-connector-python's; PyMySQL's works too).

    Rows already in the table are indexed at once; InnoDB keeps the index in step with later
    writes (committed rows become searchable at commit). DDL commits implicitly.

    Raises:
        ValueError: if the mapping names no text index or has nothing to index.
        mysql.connector.Error: if the server refuses (no ALTER privilege, a column that is
            not CHAR / VARCHAR / TEXT, a table engine without FULLTEXT support...).
    """
    statement = fulltext_index_statement(mapping, columns=columns)
    with connection.cursor() as cursor:
        cursor.execute(statement)
