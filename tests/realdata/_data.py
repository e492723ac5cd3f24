"""Read Chinook and AdventureWorks from the shared data folder into engine-neutral tables.

The files are read in place (never copied into the project):

- ``tabular/chinook/Chinook_Sqlite.sql`` is executed by ``sqlite3`` into an in-memory
  database, and each track is read back joined to its album, artist, genre and media type;
- ``tabular/adventureworks_oltp/*.csv`` are headerless delimited files whose layout
  ``COLUMNS.md`` documents: products with their subcategory, category, model and English
  description; product reviews (tab-separated, with line breaks inside the comments); and
  job candidates' résumés (``+|`` / ``&|\\n`` delimited XML).

The result is plain Python values per table, so every engine is seeded with exactly the same
rows. ``RealData.version`` fingerprints the input bytes and this module's layout, so a
seeded database can tell whether it is current.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from pathlib import Path

__all__ = [
    "INPUT_FILES",
    "LAYOUT_VERSION",
    "Column",
    "ColumnKind",
    "RealData",
    "Table",
    "load_real_data",
]

# Bump when the tables below change shape or content rules: every seeded database rebuilds.
LAYOUT_VERSION = "realdata-1"

CHINOOK = "tabular/chinook/Chinook_Sqlite.sql"
_AW = "tabular/adventureworks_oltp"
INPUT_FILES = (
    CHINOOK,
    f"{_AW}/Product.csv",
    f"{_AW}/ProductSubcategory.csv",
    f"{_AW}/ProductCategory.csv",
    f"{_AW}/ProductModel.csv",
    f"{_AW}/ProductDescription.csv",
    f"{_AW}/ProductModelProductDescriptionCulture.csv",
    f"{_AW}/ProductReview.csv",
    f"{_AW}/JobCandidate.csv",
)


class ColumnKind(StrEnum):
    """Engine-neutral column types; each seeder maps them to its own DDL."""

    INTEGER = "integer"
    TEXT = "text"
    MONEY = "money"
    DATE = "date"


@dataclass(frozen=True)
class Column:
    name: str
    kind: ColumnKind


@dataclass(frozen=True)
class Table:
    """One relation: its columns (the first is the primary key) and its rows."""

    name: str
    columns: tuple[Column, ...]
    rows: tuple[tuple[object, ...], ...]

    @property
    def key(self) -> str:
        return self.columns[0].name


@dataclass(frozen=True)
class RealData:
    version: str
    tables: tuple[Table, ...]

    def table(self, name: str) -> Table:
        return next(t for t in self.tables if t.name == name)


def _columns(*spec: tuple[str, ColumnKind]) -> tuple[Column, ...]:
    return tuple(Column(name, kind) for name, kind in spec)


_I, _T, _M, _D = ColumnKind.INTEGER, ColumnKind.TEXT, ColumnKind.MONEY, ColumnKind.DATE

TRACK_COLUMNS = _columns(
    ("track_id", _I),
    ("name", _T),
    ("album", _T),
    ("artist", _T),
    ("genre", _T),
    ("composer", _T),
    ("media_type", _T),
    ("milliseconds", _I),
    ("unit_price", _M),
)
PRODUCT_COLUMNS = _columns(
    ("product_id", _I),
    ("name", _T),
    ("product_number", _T),
    ("category", _T),
    ("subcategory", _T),
    ("model", _T),
    ("description", _T),
    ("color", _T),
    ("list_price", _M),
)
REVIEW_COLUMNS = _columns(
    ("review_id", _I),
    ("product_id", _I),
    ("product", _T),
    ("reviewer", _T),
    ("rating", _I),
    ("reviewed_on", _D),
    ("comments", _T),
)
CANDIDATE_COLUMNS = _columns(
    ("candidate_id", _I),
    ("name", _T),
    ("skills", _T),
    ("experience", _T),
    ("education", _T),
    ("location", _T),
)


def fingerprint(root: Path) -> str:
    """Return the data version: a hash of this layout and every input file's bytes."""
    digest = hashlib.sha256(LAYOUT_VERSION.encode())
    for relative in INPUT_FILES:
        digest.update(relative.encode())
        digest.update(hashlib.sha256((root / relative).read_bytes()).digest())
    return f"{LAYOUT_VERSION}:{digest.hexdigest()[:16]}"


def load_real_data(root: Path) -> RealData:
    """Parse every input under ``root`` (the shared data folder) into tables."""
    return RealData(
        version=fingerprint(root),
        tables=(
            Table("tracks", TRACK_COLUMNS, _tracks(root / CHINOOK)),
            Table("products", PRODUCT_COLUMNS, _products(root / _AW)),
            Table("product_reviews", REVIEW_COLUMNS, _reviews(root / _AW)),
            Table("job_candidates", CANDIDATE_COLUMNS, _candidates(root / _AW)),
        ),
    )


# --- Chinook --------------------------------------------------------------------------------


def _tracks(script: Path) -> tuple[tuple[object, ...], ...]:
    with closing(sqlite3.connect(":memory:")) as connection:
        connection.executescript(script.read_text(encoding="utf-8"))
        rows = connection.execute(
            "SELECT t.TrackId, t.Name, al.Title, ar.Name, g.Name, t.Composer, m.Name, "
            "t.Milliseconds, t.UnitPrice "
            "FROM Track t "
            "JOIN Album al ON al.AlbumId = t.AlbumId "
            "JOIN Artist ar ON ar.ArtistId = al.ArtistId "
            "LEFT JOIN Genre g ON g.GenreId = t.GenreId "
            "LEFT JOIN MediaType m ON m.MediaTypeId = t.MediaTypeId "
            "ORDER BY t.TrackId"
        ).fetchall()
    return tuple((*row[:8], Decimal(str(row[8]))) for row in rows)


# --- AdventureWorks -------------------------------------------------------------------------


def _tab_rows(path: Path, width: int) -> Iterator[list[str]]:
    """Rows of a tab-separated, newline-terminated file with no embedded line breaks."""
    for line in path.read_text(encoding="utf-8").split("\n"):
        if line:
            fields = line.split("\t")
            if len(fields) != width:
                msg = f"{path.name}: expected {width} fields, got {len(fields)}"
                raise ValueError(msg)
            yield fields


def _plus_rows(path: Path, width: int) -> Iterator[list[str]]:
    """Rows of a ``+|`` field / ``&|\\n`` row delimited file (fields may span lines)."""
    for record in path.read_text(encoding="utf-8").split("&|\n"):
        if record.strip():
            fields = record.split("+|")
            if len(fields) != width:
                msg = f"{path.name}: expected {width} fields, got {len(fields)}"
                raise ValueError(msg)
            yield fields


def _none(text: str) -> str | None:
    text = text.strip()
    return text or None


def _products(folder: Path) -> tuple[tuple[object, ...], ...]:
    categories = {r[0]: r[1] for r in _tab_rows(folder / "ProductCategory.csv", 4)}
    subcategories = {
        r[0]: (r[2], categories[r[1]]) for r in _tab_rows(folder / "ProductSubcategory.csv", 5)
    }
    models = {r[0]: r[1] for r in _plus_rows(folder / "ProductModel.csv", 6)}
    descriptions = {r[0]: r[1].strip() for r in _tab_rows(folder / "ProductDescription.csv", 4)}
    english = {
        r[0]: descriptions[r[1]]
        for r in _tab_rows(folder / "ProductModelProductDescriptionCulture.csv", 4)
        if r[2].strip() == "en"
    }
    rows: list[tuple[object, ...]] = []
    for r in _tab_rows(folder / "Product.csv", 25):
        subcategory, category = subcategories.get(r[18], (None, None))
        rows.append(
            (
                int(r[0]),
                r[1],
                r[2],
                category,
                subcategory,
                models.get(r[19]),
                english.get(r[19]),
                _none(r[5]),
                Decimal(r[9]).quantize(Decimal("0.01")),
            )
        )
    return tuple(rows)


# The comments contain line breaks, so a row is recognised by its shape, not by lines.
_REVIEW = re.compile(
    r"^(\d+)\t(\d+)\t([^\t]*)\t(\d{4}-\d\d-\d\d)[^\t]*\t[^\t]*\t([1-5])\t([^\t]*)\t"
    r"\d{4}-\d\d-\d\d [\d:.]+$",
    re.MULTILINE,
)


def _reviews(folder: Path) -> tuple[tuple[object, ...], ...]:
    names = {r[0]: r[1] for r in _tab_rows(folder / "Product.csv", 25)}
    text = (folder / "ProductReview.csv").read_text(encoding="utf-8")
    matches = list(_REVIEW.finditer(text))
    if sum(len(m.group(0)) + 1 for m in matches) != len(text):
        msg = "ProductReview.csv: some text is not part of a recognised review row"
        raise ValueError(msg)
    # The reviewer's e-mail address (column 5) is personal data nobody searches for: not loaded.
    return tuple(
        (
            int(m[1]),
            int(m[2]),
            names[m[2]],
            m[3],
            int(m[5]),
            m[4],
            " ".join(m[6].split()),
        )
        for m in matches
    )


_RESUME = "{http://schemas.microsoft.com/sqlserver/2004/07/adventure-works/Resume}"


def _text_of(element: ET.Element | None, *paths: str) -> list[str]:
    if element is None:
        return []
    found = (e.text for path in paths for e in element.iterfind(path.replace("ns:", _RESUME)))
    return [" ".join(t.split()) for t in found if t and t.strip()]


def _candidates(folder: Path) -> tuple[tuple[object, ...], ...]:
    rows: list[tuple[object, ...]] = []
    for fields in _plus_rows(folder / "JobCandidate.csv", 4):
        # A fixed, checksummed sample file (PROVENANCE.md) parsed by expat >= 2.4, which
        # refuses entity-expansion bombs; no external entities are ever fetched.
        resume = ET.fromstring(fields[2])  # noqa: S314
        name = " ".join(_text_of(resume, "ns:Name/ns:Name.First", "ns:Name/ns:Name.Last"))
        experience = []
        for job in resume.iterfind(f"{_RESUME}Employment"):
            title = ", ".join(_text_of(job, "ns:Emp.JobTitle", "ns:Emp.OrgName"))
            duties = " ".join(_text_of(job, "ns:Emp.Responsibility"))
            experience.append(f"{title}: {duties}" if duties else title)
        education = []
        for school in resume.iterfind(f"{_RESUME}Education"):
            parts = _text_of(school, "ns:Edu.Degree", "ns:Edu.Major", "ns:Edu.School")
            education.append(", ".join(parts))
        cities = _text_of(resume, "ns:Address/ns:Addr.Location/ns:Location/ns:Loc.City")
        rows.append(
            (
                int(fields[0]),
                name,
                " ".join(_text_of(resume, "ns:Skills")),
                " ".join(experience),
                "; ".join(education),
                cities[0] if cities else None,
            )
        )
    return tuple(rows)
