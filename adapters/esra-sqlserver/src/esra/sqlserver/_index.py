"""DDL for the full-text catalog and index a mapping needs (run once, by an administrator)."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import mssql

from esra.core.config import Mapping
from esra.sql import schema_identifier

__all__ = ["fulltext_index_statements", "searchable_columns"]

_preparer = mssql.dialect().identifier_preparer  # type: ignore[no-untyped-call]


def searchable_columns(mapping: Mapping) -> list[str]:
    """The columns the provider searches: those marked searchable, else title and content."""
    marked = [f.column for f in mapping.fields if f.is_searchable]
    if marked:
        return marked
    names = (mapping.title_field, *mapping.content_fields)
    specs = (mapping.field(name) for name in names)
    return list(dict.fromkeys(spec.column for spec in specs if spec is not None))


def fulltext_index_statements(
    mapping: Mapping, *, key_index: str, catalog: str | None = None
) -> list[str]:
    """Return ``CREATE FULLTEXT CATALOG`` (when the catalog is new) and ``CREATE FULLTEXT INDEX``.

    Args:
        mapping: the mapping whose searchable columns to index.
        key_index: the unique, single-column, non-nullable index on the record key
            (usually the primary key's name) that full-text search uses as ``KEY``.
        catalog: the full-text catalog; ``mapping.text_index`` when omitted.

    Identifiers come from configuration and are quoted by the ``mssql`` dialect, the schema
    always as one identifier (never read as ``database.owner``). Population
    is asynchronous: rows become searchable when the crawl finishes (``CHANGE_TRACKING
    AUTO`` keeps it current).
    """
    catalog_name = catalog or mapping.text_index
    if not catalog_name:
        msg = "a full-text catalog name is needed (catalog= or Mapping.text_index)"
        raise ValueError(msg)
    quote = _preparer.quote
    schema = schema_identifier(mapping.schema, _preparer)
    table = _preparer.format_table(sa.table(mapping.relation, schema=schema))
    columns = ", ".join(quote(name) for name in searchable_columns(mapping))
    literal = catalog_name.replace("'", "''")
    return [
        f"IF NOT EXISTS (SELECT 1 FROM sys.fulltext_catalogs WHERE name = N'{literal}') "  # noqa: S608 - configured names, quoted
        f"CREATE FULLTEXT CATALOG {quote(catalog_name)}",
        f"CREATE FULLTEXT INDEX ON {table} ({columns}) KEY INDEX {quote(key_index)} "
        f"ON {quote(catalog_name)} WITH CHANGE_TRACKING AUTO",
    ]
