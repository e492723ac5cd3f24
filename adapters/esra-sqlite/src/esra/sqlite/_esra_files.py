"""Which SQLite files are ESRA's own: a document store, the state database, an audit log.

A plain ``sqlite`` source must never read one (see ``open_readonly``), and the files name no
owner: a schema is recognised by its version table together with a table only that schema
creates, so a customer database that happens to hold an ``audit_records`` table is not taken
for ESRA's.
"""

from __future__ import annotations

import sqlite3

__all__ = ["ESRA_SCHEMAS", "esra_schema_of"]

# Schema name -> (its version table, a table only it creates). Kept beside the schema
# modules' own constants by a test that creates each schema and recognises it.
ESRA_SCHEMAS: dict[str, tuple[str, str]] = {
    "document store": ("store_schema", "store_segments"),
    "configuration": ("config_schema", "config_workspaces"),
    "audit log": ("audit_schema", "audit_records"),
    "secrets": ("esra_secrets_schema", "esra_secrets"),
}


def esra_schema_of(connection: sqlite3.Connection) -> str | None:
    """The name of the ESRA schema ``connection``'s main database holds, or ``None``."""
    tables = {
        name
        for (name,) in connection.execute(
            "SELECT name FROM main.sqlite_master WHERE type = 'table'"
        ).fetchall()
    }
    for schema, (version_table, own_table) in ESRA_SCHEMAS.items():
        if version_table in tables and own_table in tables:
            return schema
    return None
