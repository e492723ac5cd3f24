"""Values travel as ``sp_executesql`` RPC parameters, never in command text (no server here).

The provider runs against a recording ``_mssql`` stand-in (``_fake_mssql``); the last tests
hold that stand-in to the real pymssql module, so a renamed or re-signed driver member fails
here rather than on a customer's server.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

import pymssql
import pytest
from pymssql import _mssql

from esra.core._config.mapping import FieldType, Operator
from esra.core._config.source import SourceHealth
from esra.core._pipeline.values import ValidatedQuery
from esra.core._query import ResolvedFilter
from esra.core.codes import ProviderErrorCode
from esra.core.exceptions import ProviderError
from esra.core.testing.contract import CONTRACT_MAPPING
from esra.sqlserver import Isolation, SqlServerProvider
from esra.sqlserver._provider import bindable, run_fenced
from esra.sqlserver._rpc import MAX_NVARCHAR_UNITS, RpcLimitError, rpc_statement, rpc_text
from esra.sqlserver._session import ROLLBACK_SQL, session_sql
from tests._injection import payload_query
from tests.sqlserver._fake_mssql import Bind, FakeConnection, FakeMssql, FakeProcedure
from tests.sqlserver.conftest import issue, provider, uncached_builder

HOSTILE = (
    "'; DROP TABLE x;--",
    "a\x00b'\"]",
    "%(lim)s @lim %% %s",
    "N'); EXEC xp_cmdshell 'dir' --",
    "\udcff lone surrogate",
    "é 中文 🙂",
)


def _query(payload: str | None = None) -> ValidatedQuery:
    """Every slot (terms, phrase, filter value, claim) holds ``payload``, or benign text."""
    if payload is None:
        return payload_query(excluded=("solar",))
    return payload_query(
        required=payload,
        optional=payload,
        phrase=payload,
        value=payload,
        claim=payload,
        excluded=(payload,),
    )


def _run(query: ValidatedQuery, rows: list[tuple[Any, ...]] | None = None) -> FakeMssql:
    built = uncached_builder().build(query)
    statement = rpc_statement(built.sql, {k: bindable(v) for k, v in built.params.items()})
    mssql = FakeMssql(rows or [])
    batch = session_sql(lock_timeout_ms=2000, isolation=Isolation.READ_COMMITTED)
    run_fenced(mssql, batch, statement, query_timeout=2)
    return mssql


def _texts(mssql: FakeMssql) -> list[object]:
    """Everything the server parses as T-SQL: the batches, ``@stmt`` and ``@params``."""
    (proc,) = mssql.procedures
    code = [b.value for b in proc.binds if b.name in {"@stmt", "@params"}]
    return [*mssql.batches(), proc.name, *code]


def _values(mssql: FakeMssql) -> list[Bind]:
    (proc,) = mssql.procedures
    return [b for b in proc.binds if b.name not in {"@stmt", "@params"}]


def test_the_execution_is_a_fenced_rpc_in_this_order() -> None:
    """Timeout, fencing batch, sp_executesql with @stmt/@params then each value, rows, rollback."""
    mssql = _run(_query())
    (proc,) = mssql.procedures
    assert proc.name == "sp_executesql"
    assert [kind for kind, _ in mssql.calls] == ["query_timeout", "batch", "rpc", "rows", "batch"]
    assert mssql.calls[0] == ("query_timeout", 2)
    assert mssql.batches() == [
        "SET LOCK_TIMEOUT 2000; SET TRANSACTION ISOLATION LEVEL READ COMMITTED; BEGIN TRANSACTION",
        ROLLBACK_SQL,
    ]
    assert mssql.calls[3] == ("rows", _mssql.ROW_FORMAT_TUPLE)
    assert [b.name for b in proc.binds[:2]] == ["@stmt", "@params"]
    assert all(b.dbtype == _mssql.SQLVARCHAR for b in proc.binds[:2])
    stmt = str(proc.binds[0].value)
    assert "%(" not in stmt
    assert "CONTAINSTABLE(contract_articles, (art_title, [Art Body]), @t0)" in stmt
    assert stmt.endswith("FETCH FIRST @lim ROWS ONLY")
    # Every placeholder in @stmt is declared in @params and bound, in text order.
    names = [b.name for b in _values(mssql)]
    assert names == ["@t0", "@tp0", "@q", "@tx0", "@f0_0", "@r0_0", "@lim"]
    assert proc.binds[1].value == ", ".join(
        f"{name} {'bigint' if name == '@lim' else 'nvarchar(4000)'}" for name in names
    )


@pytest.mark.parametrize("payload", HOSTILE, ids=repr)
def test_a_hostile_value_is_only_ever_a_bound_parameter(payload: str) -> None:
    """Batches, @stmt and @params are byte-identical to the benign run; the payload is a value."""
    benign, hostile = _run(_query()), _run(_query(payload))
    assert _texts(hostile) == _texts(benign)
    assert [(b.name, b.dbtype) for b in _values(hostile)] == [
        (b.name, b.dbtype) for b in _values(benign)
    ]
    core = str(bindable(payload)).replace("\x00", " ").replace('"', "")
    assert all(core not in str(text) for text in _texts(hostile))
    by_name = {b.name: str(b.value) for b in _values(hostile)}
    assert by_name["@f0_0"] == by_name["@r0_0"] == bindable(payload)
    assert core in by_name["@t0"]
    assert "\x00" not in "".join(by_name.values())


def test_the_declared_types_follow_the_python_type_not_the_value() -> None:
    """A small and a huge integer, empty and maximal text: the same @params and types."""
    for year, category in ((1, ""), (2**40, "x" * MAX_NVARCHAR_UNITS)):
        query = issue(
            filters=(
                ResolvedFilter("art_year", FieldType.INTEGER, Operator.GTE, (year,)),
                ResolvedFilter("art_category", FieldType.TEXT, Operator.EQ, (category,)),
            )
        )
        built = uncached_builder().build(query)
        statement = rpc_statement(built.sql, built.params)
        assert statement.definition == (
            "@f0_0 bigint, @f1_0 nvarchar(4000), @r0_0 nvarchar(4000), @lim bigint"
        )
        assert [p.dbtype for p in statement.parameters] == [
            _mssql.SQLINT8,
            _mssql.SQLVARCHAR,
            _mssql.SQLVARCHAR,
            _mssql.SQLINT8,
        ]


def test_every_supported_python_type_has_a_declared_type() -> None:
    """bool before int (a subclass), float, dates as ISO text the server converts, NULL."""
    sql = "SELECT %(a)s, %(b)s, %(c)s, %(d)s, %(e)s, %(f)s, %(g)s"
    aware = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    values = {
        "a": True,
        "b": 3,
        "c": 0.5,
        "d": date(2024, 1, 2),
        "e": datetime(2024, 1, 2, 3, 4, 5),
        "f": aware,
        "g": None,
    }
    statement = rpc_statement(sql, values)
    assert statement.text == "SELECT @a, @b, @c, @d, @e, @f, @g"
    assert statement.definition == (
        "@a bit, @b bigint, @c float, @d date, @e datetime2, @f datetimeoffset, @g nvarchar(4000)"
    )
    assert [p.value for p in statement.parameters] == [
        True,
        3,
        0.5,
        "2024-01-02",
        "2024-01-02 03:04:05",
        "2024-01-02 03:04:05+00:00",
        None,
    ]
    with pytest.raises(TypeError, match="no RPC type"):
        rpc_statement("SELECT %(a)s", {"a": b"bytes"})


def test_pyformat_escapes_and_malformed_placeholders() -> None:
    """``%%`` is a literal percent sign; a bare ``%`` or an odd name is refused."""
    assert rpc_text("SELECT [a%%b] WHERE x = %(f0_0)s OR y = %(f0_0)s") == (
        "SELECT [a%b] WHERE x = @f0_0 OR y = @f0_0",
        ("f0_0",),
    )
    for bad in ("SELECT %s", "SELECT %(a b)s", "SELECT %(1a)s", "SELECT 5 % 2"):
        with pytest.raises(ValueError, match="malformed"):
            rpc_text(bad)
    with pytest.raises(ValueError, match="no value for b"):
        rpc_statement("SELECT %(a)s, %(b)s", {"a": 1})


def test_anything_too_long_for_one_rpc_parameter_is_refused() -> None:
    """4,000 UTF-16 code units fit; one more (an emoji counts two) is refused, not truncated."""
    assert rpc_statement("SELECT %(a)s", {"a": "x" * MAX_NVARCHAR_UNITS}).parameters
    for value in ("x" * (MAX_NVARCHAR_UNITS + 1), "🙂" * (MAX_NVARCHAR_UNITS // 2) + "x"):
        with pytest.raises(RpcLimitError, match="value @a"):
            rpc_statement("SELECT %(a)s", {"a": value})
    with pytest.raises(RpcLimitError, match="the statement"):
        rpc_statement("SELECT 1" + " " * MAX_NVARCHAR_UNITS + " WHERE 1 = %(a)s", {"a": 1})
    with pytest.raises(RpcLimitError, match="bigint"):
        rpc_statement("SELECT %(a)s", {"a": 2**63})


async def test_the_provider_refuses_an_unbindable_query_before_connecting() -> None:
    """An over-long claim is SYNTAX_ERROR — the query's fault, not the source's — before any
    socket (the default port is closed: a connect attempt would have been
    CONNECTION_REFUSED)."""
    p = provider()
    query = payload_query(claim="x" * (MAX_NVARCHAR_UNITS + 1))
    with pytest.raises(ProviderError) as raised:
        await p.execute(query, timeout_s=2.0)
    assert raised.value.code is ProviderErrorCode.SYNTAX_ERROR
    await p.close()


def test_the_rollback_runs_after_a_failed_statement_and_never_masks_it() -> None:
    """The server's error is what propagates, even when the rollback behind it fails too."""
    built = uncached_builder().build(_query())
    statement = rpc_statement(built.sql, built.params)
    batch = session_sql(lock_timeout_ms=10, isolation=Isolation.SNAPSHOT)
    mssql = FakeMssql()
    mssql.fail_execute = _mssql.MSSQLDatabaseException((1222, b"Lock request time out"))
    mssql.fail_batch[ROLLBACK_SQL] = _mssql.MSSQLDriverException("dead")
    with pytest.raises(_mssql.MSSQLDatabaseException) as raised:
        run_fenced(mssql, batch, statement, query_timeout=1)
    assert raised.value.args == ((1222, b"Lock request time out"),)
    assert mssql.batches() == [batch, ROLLBACK_SQL]


@pytest.fixture
def fake_server(monkeypatch: pytest.MonkeyPatch) -> FakeMssql:
    """Every connection the provider opens is the recording stand-in."""
    mssql = FakeMssql()
    monkeypatch.setattr(pymssql, "connect", lambda **_: FakeConnection(mssql))
    return mssql


async def test_the_provider_executes_through_the_rpc(fake_server: FakeMssql) -> None:
    """End to end over the fake: rows come back typed; the claim travels as @r0_0 only."""
    fake_server.rows = [("a07", 7, "Solar", "Body", datetime(2021, 5, 1, 0, 0))]
    p: SqlServerProvider = provider(lock_timeout_ms=1500)
    query = _query("'; DROP TABLE x;--")
    (row,) = await p.execute(query, timeout_s=3.2)
    await p.close()
    assert (row.key, row.score, row.values["published"]) == ("a07", 7.0, date(2021, 5, 1))
    assert fake_server.calls[0] == ("query_timeout", 4)  # whole seconds, rounded up
    assert fake_server.batches()[0].startswith("SET LOCK_TIMEOUT 1500; ")
    assert fake_server.batches()[-1] == ROLLBACK_SQL
    (proc,) = fake_server.procedures
    assert "DROP" not in str(proc.binds[0].value)
    assert {b.name: b.value for b in proc.binds}["@r0_0"] == "'; DROP TABLE x;--"


async def test_health_binds_the_configured_name(fake_server: FakeMssql) -> None:
    """The full-text probe is an RPC too, its quoted table name a bound value."""
    fake_server.rows = [(1,)]
    p = provider(mappings=(CONTRACT_MAPPING,))
    assert await p.health() is SourceHealth.HEALTHY
    await p.close()
    assert fake_server.batches() == ["SELECT 1"]
    (proc,) = fake_server.procedures
    assert [(b.name, b.value) for b in proc.binds] == [
        ("@stmt", "SELECT OBJECTPROPERTYEX(OBJECT_ID(@name), 'TableHasActiveFulltextIndex')"),
        ("@params", "@name nvarchar(4000)"),
        ("@name", "contract_articles"),
    ]


def test_the_fake_has_only_members_the_real_driver_has() -> None:
    """Each member the provider calls exists on pymssql's real classes, with these names."""
    for name in ("query_timeout", "execute_non_query", "init_procedure", "get_iterator"):
        assert hasattr(_mssql.MSSQLConnection, name), name
        assert hasattr(FakeMssql, name), name
    for name in ("bind", "execute"):
        assert hasattr(_mssql.MSSQLStoredProcedure, name), name
        assert hasattr(FakeProcedure, name), name
    # bind(value, dbtype, param_name=None, output=False, null=False, max_length=-1)
    doc = _mssql.MSSQLStoredProcedure.bind.__doc__ or ""
    assert "bind(value, data_type, param_name = None, output = False," in doc
    assert "null = False, max_length = -1)" in doc
    for constant in ("SQLVARCHAR", "SQLINT8", "SQLFLT8", "SQLBITN", "ROW_FORMAT_TUPLE"):
        assert isinstance(getattr(_mssql, constant), int), constant
    # The pooled object is a pymssql.Connection; the provider reaches its _mssql one.
    assert hasattr(pymssql.Connection, "_conn")
    assert isinstance(_mssql.MSSQLDatabaseException((1, b"x")), _mssql.MSSQLException)
