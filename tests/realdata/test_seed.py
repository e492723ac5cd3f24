"""The real data parses completely, and seeding is faithful and idempotent on every engine."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from tests._databases import require_dsn, unreachable
from tests.realdata._config import realdata_snapshot
from tests.realdata._data import RealData
from tests.realdata.seed import seed_mysql, seed_postgres, seed_sqlite

pytestmark = pytest.mark.external_data

# Row counts of the upstream files (Chinook 1.4.5; AdventureWorks OLTP install script CSVs).
EXPECTED_ROWS = {"tracks": 3503, "products": 504, "product_reviews": 4, "job_candidates": 13}


def test_every_table_is_parsed_completely(real_data: RealData) -> None:
    assert {t.name: len(t.rows) for t in real_data.tables} == EXPECTED_ROWS
    for table in real_data.tables:
        keys = [row[0] for row in table.rows]
        assert len(set(keys)) == len(keys), table.name
        assert all(len(row) == len(table.columns) for row in table.rows), table.name


def test_tracks_carry_their_album_artist_and_genre(real_data: RealData) -> None:
    tracks = {row[0]: row for row in real_data.table("tracks").rows}
    assert tracks[1][1:5] == (
        "For Those About To Rock (We Salute You)",
        "For Those About To Rock We Salute You",
        "AC/DC",
        "Rock",
    )
    assert tracks[63][3] == "Antônio Carlos Jobim"  # non-ASCII survives as UTF-8


def test_products_carry_their_english_description(real_data: RealData) -> None:
    products = {row[0]: row for row in real_data.table("products").rows}
    described = [row for row in products.values() if row[6]]
    assert len(described) == 294  # products whose model has an English description
    frame = products[830]
    assert frame[1:6] == (
        "ML Mountain Frame - Black, 40",
        "FR-M63B-40",
        "Components",
        "Mountain Frames",
        "ML Mountain Frame",
    )
    assert "aluminum" in str(frame[6]).lower()


def test_reviews_and_resumes_are_parsed_whole(real_data: RealData) -> None:
    reviews = {row[0]: row for row in real_data.table("product_reviews").rows}
    assert reviews[1][2:6] == ("Mountain Bike Socks, M", "John Smith", 5, "2024-09-17")
    assert str(reviews[1][6]).endswith("I won't go on another trip without them!")
    assert "\n" not in str(reviews[4][6])  # line breaks inside comments are folded
    candidates = {row[0]: row for row in real_data.table("job_candidates").rows}
    assert candidates[1][1] == "Shai Bassli"
    assert "CNC machine programs" in str(candidates[1][3])
    assert "Mechanical Engineering" in str(candidates[1][4])


def _sqlite_counts(path: Path) -> dict[str, int]:
    with closing(sqlite3.connect(path)) as connection:
        return {
            name: connection.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0]
            for name in EXPECTED_ROWS
        }


def test_sqlite_seeding_is_idempotent_and_follows_the_data_version(
    real_data: RealData, tmp_path: Path
) -> None:
    path = tmp_path / "seed.db"
    mappings = realdata_snapshot().mappings
    assert seed_sqlite(path, real_data, mappings) is True
    assert _sqlite_counts(path) == EXPECTED_ROWS
    before = path.stat().st_mtime_ns
    assert seed_sqlite(path, real_data, mappings) is False
    assert path.stat().st_mtime_ns == before
    changed = dataclasses.replace(real_data, version=real_data.version + "-next")
    assert seed_sqlite(path, changed, mappings) is True
    assert _sqlite_counts(path) == EXPECTED_ROWS
    with closing(sqlite3.connect(path)) as connection:
        hits = connection.execute(
            "SELECT count(*) FROM tracks_fts WHERE tracks_fts MATCH 'jobim'"
        ).fetchone()[0]
    assert hits > 0


SCRATCH = "esra_realdata_seedtest"


@pytest.fixture
def postgres_scratch() -> Iterator[str]:
    dsn = require_dsn("ESRA_TEST_POSTGRES_DSN")
    import psycopg

    try:
        connection = psycopg.connect(dsn, autocommit=True)
    except psycopg.OperationalError as exc:
        unreachable("ESRA_TEST_POSTGRES_DSN", f"cannot connect: {type(exc).__name__}")
    with connection:
        yield dsn
        connection.execute(f"DROP SCHEMA IF EXISTS {SCRATCH} CASCADE")


@pytest.mark.integration
@pytest.mark.postgres
def test_postgres_seeding_is_idempotent(real_data: RealData, postgres_scratch: str) -> None:
    import psycopg

    mappings = realdata_snapshot().mappings
    assert seed_postgres(postgres_scratch, real_data, mappings, schema_name=SCRATCH) is True
    assert seed_postgres(postgres_scratch, real_data, mappings, schema_name=SCRATCH) is False
    with psycopg.connect(postgres_scratch) as connection:
        counts = {
            name: connection.execute(f"SELECT count(*) FROM {SCRATCH}.{name}").fetchone()
            for name in EXPECTED_ROWS
        }
        artist = connection.execute(
            f"SELECT artist FROM {SCRATCH}.tracks WHERE track_id = 63"
        ).fetchone()
    assert {k: v[0] for k, v in counts.items() if v} == EXPECTED_ROWS
    assert artist == ("Antônio Carlos Jobim",)


@pytest.fixture
def mysql_scratch() -> Iterator[str]:
    dsn = require_dsn("ESRA_TEST_MYSQL_DSN")
    import pymysql

    from tests.realdata.seed import mysql_connect

    try:
        connection = mysql_connect(dsn)
    except pymysql.err.OperationalError as exc:
        unreachable("ESRA_TEST_MYSQL_DSN", f"cannot connect: {type(exc).__name__}")
    try:
        yield dsn
        with connection.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {SCRATCH}")
    finally:
        connection.close()


@pytest.mark.integration
@pytest.mark.mysql
def test_mysql_seeding_is_idempotent(real_data: RealData, mysql_scratch: str) -> None:
    from tests.realdata.seed import mysql_connect

    mappings = realdata_snapshot().mappings
    assert seed_mysql(mysql_scratch, real_data, mappings, database_name=SCRATCH) is True
    assert seed_mysql(mysql_scratch, real_data, mappings, database_name=SCRATCH) is False
    connection = mysql_connect(mysql_scratch)
    try:
        with connection.cursor() as cursor:
            counts = {}
            for name in EXPECTED_ROWS:
                cursor.execute(f"SELECT count(*) FROM {SCRATCH}.{name}")
                counts[name] = cursor.fetchone()[0]
            cursor.execute(f"SELECT artist FROM {SCRATCH}.tracks WHERE track_id = 63")
            artist = cursor.fetchone()
    finally:
        connection.close()
    assert counts == EXPECTED_ROWS
    assert artist == ("Antônio Carlos Jobim",)
