"""The text patterns ``esra.core.testing.leaks`` looks for, one named rule each.

Two rule sets. *Composed* text is text ESRA writes itself (warning messages, error messages,
audit reasons and dimensions, field names, source names): every rule applies there, because
none of it may ever quote SQL, a connection, a credential, a traceback or a driver. *Content*
is data a source returned (titles, fragments, field values, answers): enterprise records and
the hostile test corpora legitimately contain SQL, DSNs and driver messages, so only
fingerprints that ESRA itself would have had to leak apply there — the bind and label names
of ESRA's own statements, Python tracebacks, and exact secret values (see ``leaks``).
"""

from __future__ import annotations

import re
from enum import StrEnum

import attrs

__all__ = ["COMPOSED_RULES", "CONTENT_RULES", "LeakCategory", "Rule"]


class LeakCategory(StrEnum):
    """What kind of thing leaked."""

    SQL = "sql"
    CONNECTION = "connection"
    CREDENTIAL = "credential"
    STACK_TRACE = "stack_trace"
    PROVIDER_DIAGNOSTIC = "provider_diagnostic"
    UNAUTHORIZED = "unauthorized"
    UNCLASSIFIED = "unclassified"


def _compile(pattern: str | re.Pattern[str]) -> re.Pattern[str]:
    return re.compile(pattern)


@attrs.frozen
class Rule:
    """One named pattern and the category of what it finds."""

    name: str
    category: LeakCategory
    pattern: re.Pattern[str] = attrs.field(converter=_compile)


_C = LeakCategory

# ESRA's own statement vocabulary (esra.sql._builder and the engines' full-text dialects): the
# result labels, and the bind names in pyformat (%(name)s) and named (:name) style, SQLAlchemy's
# anonymous ``param_N`` included. None of it occurs in the seeded corpora, so finding it in
# returned data means ESRA quoted its SQL. tests/sql/test_leak_fingerprints.py keeps this list
# in step with the builders.
_ESRA_BINDS = r"(?:[fr]\d+_\d+|p\d+|param_\d+|lim|lk|qcfg|t[ropxeb]?\d+[lxwn]?|q\d*)"
ESRA_SQL_RULES: tuple[Rule, ...] = (
    Rule("sql.esra_label", _C.SQL, r"\besra_(?:k|s|c\d+)\b"),
    Rule("sql.esra_bind_pyformat", _C.SQL, rf"%\({_ESRA_BINDS}\)s"),
    Rule("sql.esra_bind_named", _C.SQL, rf"(?<![\w:/]):{_ESRA_BINDS}\b"),
)

STACK_TRACE_RULES: tuple[Rule, ...] = (
    Rule("trace.python_header", _C.STACK_TRACE, r"Traceback \(most recent call last\)"),
    Rule("trace.python_frame", _C.STACK_TRACE, r"File \"[^\"\n]+\", line \d+"),
)

SQL_RULES: tuple[Rule, ...] = (
    # Upper-case keywords only: "select ... from" is also English. SQLAlchemy, the drivers'
    # messages and hand-written statements all use upper case; lower-case SQL is caught by
    # its unambiguous shapes below.
    Rule("sql.select_from", _C.SQL, r"\bSELECT\s[^;]{0,400}?\bFROM\b"),
    Rule("sql.select_star", _C.SQL, r"(?i:\bselect\s+(?:\*|count\s*\(|distinct\s))"),
    Rule("sql.insert_into", _C.SQL, r"(?i:\binsert\s+into\b)"),
    Rule("sql.delete_from", _C.SQL, r"(?i:\bdelete\s+from\b)"),
    Rule("sql.update_set", _C.SQL, r"(?i:\bupdate\s+[\w.\"`\[\]]+\s+set\b)"),
    Rule(
        "sql.ddl",
        _C.SQL,
        r"(?i:\b(?:drop|alter|create|truncate)\s+(?:table|index|view|schema|database)\b)",
    ),
    Rule("sql.where_clause", _C.SQL, r"\bWHERE\s+[\w.\"`\[\]]+\s*(?:=|<>|!=|<|>|\bIN\b|\bLIKE\b)"),
    Rule("sql.order_by", _C.SQL, r"\bORDER BY\s+[\w.\"`\[\]]+"),
    Rule("sql.union_select", _C.SQL, r"(?i:\bunion\s+(?:all\s+)?select\b)"),
    Rule(
        "sql.tsquery",
        _C.SQL,
        r"(?i:\b(?:plainto_|phraseto_|websearch_)?to_tsquery\s*\(|\bto_tsvector\s*\(|"
        r"\bts_rank(?:_cd)?\s*\()",
    ),
    Rule("sql.match_against", _C.SQL, r"(?i:\bmatch\s*\([^)]{0,300}\)\s*against\b)"),
    Rule("sql.contains", _C.SQL, r"(?i:\b(?:contains|containstable|freetext|freetexttable)\s*\()"),
    Rule("sql.fts5", _C.SQL, r"(?i:\b(?:bm25|snippet|highlight)\s*\(|\bmatch\s+\?)"),
    Rule("sql.bind_pyformat", _C.SQL, r"%\(\w+\)s"),
    Rule("sql.bind_named", _C.SQL, r"(?<![\w:/]):[a-z_][a-z0-9_]*\b(?!\s*//)"),
    *ESRA_SQL_RULES,
)

_DB_SCHEMES = (
    r"(?:postgres(?:ql)?|mysql|mariadb|mssql|sqlserver|oracle|sqlite|redis|mongodb(?:\+srv)?"
    r"|jdbc:[a-z]+)(?:\+[a-z0-9]+)?://"
)
CONNECTION_RULES: tuple[Rule, ...] = (
    Rule("connection.dsn", _C.CONNECTION, rf"(?i:\b{_DB_SCHEMES})"),
    Rule(
        "connection.keyword",
        _C.CONNECTION,
        r"(?i:\b(?:host|hostaddr|port|dbname|sslmode|connect_timeout|application_name"
        r"|server|data source|initial catalog|uid|user id)\s*=\s*[^\s;,]+)",
    ),
    Rule(
        "connection.host_port",
        _C.CONNECTION,
        r"(?i:\b(?:localhost|(?:\d{1,3}\.){3}\d{1,3}|[a-z][\w-]*(?:\.[\w-]+)+):\d{2,5}\b)",
    ),
)

CREDENTIAL_RULES: tuple[Rule, ...] = (
    Rule(
        "credential.assignment",
        _C.CREDENTIAL,
        r"(?i:\b(?:password|passwd|pwd|secret|api[_-]?key|access[_-]?key)\s*(?:=|:(?!//))\s*"
        r"[^\s;,]+)",
    ),
    Rule(
        "credential.url_userinfo", _C.CREDENTIAL, r"(?i:\b[a-z][a-z0-9+.-]*://[^\s/:@]+:[^\s/@]+@)"
    ),
    Rule("credential.secret_template", _C.CREDENTIAL, r"\$\{secret:[^}]*\}"),
    Rule(
        "credential.bytes_repr",
        _C.CREDENTIAL,
        r"\bb(?:'(?:[^'\\]|\\.){8,}'|\"(?:[^\"\\]|\\.){8,}\")",
    ),
    Rule("credential.bearer", _C.CREDENTIAL, r"\bBearer\s+[\w.~+/-]{8,}"),
)

PROVIDER_RULES: tuple[Rule, ...] = (
    Rule(
        "provider.module",
        _C.PROVIDER_DIAGNOSTIC,
        r"\b(?:psycopg2?|pymysql|MySQLdb|mysql\.connector|sqlite3|oracledb|cx_Oracle|pymssql"
        r"|pyodbc|sqlalchemy|asyncpg|aiosqlite)\b",
    ),
    Rule(
        "provider.exception_class",
        _C.PROVIDER_DIAGNOSTIC,
        r"\b(?:OperationalError|ProgrammingError|IntegrityError|DatabaseError|InterfaceError"
        r"|DataError|NotSupportedError|InternalError|UndefinedTable|UndefinedColumn"
        r"|UndefinedFunction|UndefinedObject|InFailedSqlTransaction|QueryCanceled"
        r"|InsufficientPrivilege|InvalidPassword|InvalidAuthorizationSpecification"
        r"|ConnectionTimeout|PoolTimeout|ObjectNotInPrerequisiteState|DeadlockDetected"
        r"|SerializationFailure|ReadOnlySqlTransaction|FeatureNotSupported)\b",
    ),
    Rule(
        "provider.python_exception",
        _C.PROVIDER_DIAGNOSTIC,
        r"\b(?:KeyError|ValueError|TypeError|AttributeError|RuntimeError|AssertionError"
        r"|IndexError|OSError|IOError|NameError|ZeroDivisionError|ConnectionError"
        r"|ConnectionRefusedError|ConnectionResetError|BrokenPipeError|TimeoutError"
        r"|NotImplementedError|UnicodeDecodeError|UnicodeEncodeError|RecursionError"
        r"|MemoryError|PermissionError|FileNotFoundError|CancelledError)\b",
    ),
    Rule("provider.object_repr", _C.PROVIDER_DIAGNOSTIC, r"<[\w.]+ object at 0x[0-9a-fA-F]+>"),
    Rule(
        "provider.postgres_message",
        _C.PROVIDER_DIAGNOSTIC,
        r"(?i:syntax error at or near|syntax error at end of input"
        r"|(?:relation|column|function|schema|role|database|type) \"[^\"]*\" does not exist"
        r"|password authentication failed|could not connect to server|connection to server at"
        r"|server closed the connection unexpectedly|canceling statement due to"
        r"|current transaction is aborted|permission denied for|no pg_hba\.conf entry"
        r"|text search configuration \"[^\"]*\"|duplicate key value violates"
        r"|violates (?:not-null|foreign key|check) constraint|could not translate host name"
        r"|is the server running on that host)",
    ),
    Rule(
        "provider.mysql_message",
        _C.PROVIDER_DIAGNOSTIC,
        r"(?i:you have an error in your sql syntax|check the manual that corresponds"
        r"|access denied for user|can't connect to (?:local )?mysql server|lost connection to mysql"
        r"|unknown column '|table '[^']*' doesn't exist|can't find fulltext index"
        r"|mysql server has gone away|unknown database '|lock wait timeout exceeded"
        r"|query execution was interrupted|maximum statement execution time exceeded)",
    ),
    Rule(
        "provider.sqlite_message",
        _C.PROVIDER_DIAGNOSTIC,
        r"(?i:no such (?:table|column|function|module)|fts5: syntax error|malformed match"
        r"|unterminated string|database is locked|unable to open database file"
        r"|attempt to write a readonly database|unrecognized token)",
    ),
    Rule(
        "provider.mssql_oracle_message",
        _C.PROVIDER_DIAGNOSTIC,
        r"(?i:invalid object name '|incorrect syntax near|login failed for user"
        r"|\bmsg \d+, level \d+|\bORA-\d{5}\b|\bDPY-\d{4}\b|\bDPI-\d{4}\b|\bTNS-\d{5}\b"
        r"|\bDB-Lib error\b)",
    ),
    Rule(
        "provider.sqlstate",
        _C.PROVIDER_DIAGNOSTIC,
        r"(?i:\bsql\s?state\b|\bpgcode\b|\berrno\b)"
        r"|\b(?:42P\d{2}|42S\d{2}|28P01|3D000|22P02|25P02|57P0\d|HY\d{3}|0A000|42601|42703"
        r"|42883|57014|40P01|08001|08006)\b",
    ),
    Rule("provider.driver_error_tuple", _C.PROVIDER_DIAGNOSTIC, r"\(\d{4},\s*[\"']"),
    Rule(
        "provider.message_prefix", _C.PROVIDER_DIAGNOSTIC, r"(?m:^|\s)(?:DETAIL|HINT|LINE \d+):\s"
    ),
)

COMPOSED_RULES: tuple[Rule, ...] = (
    *SQL_RULES,
    *CONNECTION_RULES,
    *CREDENTIAL_RULES,
    *STACK_TRACE_RULES,
    *PROVIDER_RULES,
)
CONTENT_RULES: tuple[Rule, ...] = (*ESRA_SQL_RULES, *STACK_TRACE_RULES)
