"""``esra ingest``: real and malicious documents are uploaded exactly like API uploads, indexed
in-process, reported per file with a remedy, and then found through the embedded host."""

from __future__ import annotations

import asyncio
import io
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from esra.core._docstore.upload import UploadLimits
from esra.core.config import ConfigSnapshot, dump_snapshot
from esra.core.testing import FakeClock
from esra.sqlite import SqliteDocumentRepository
from esra.starlette._cli import main
from esra.starlette._demo.build import build_demo_databases
from esra.starlette._demo.config import demo_snapshot
from esra.starlette._devtoken import load_or_create_dev_issuer
from esra.starlette._embedded import (
    EMBEDDED_CLIENT_APP,
    EMBEDDED_TENANT,
    STORE_FILE,
    embedded_snapshot,
)
from esra.starlette._host import build_app
from esra.starlette._ingest import IngestUsageError, collect_files, ingest
from esra.starlette._parts import open_embedded
from esra.starlette._store_init import cli_subject
from tests._external import shared_data
from tests.starlette._tokens import AUDIENCE, ISSUER, idp
from tests.starlette._world import mcp_client

HANDBOOK = "documents/markdown_policies_18F_handbook/travel-and-leave"
LEGACY_DOC = "documents/malicious/office_dde_macro_ole/oleobj_sample_with_calc_embedded.doc"
MACRO_DOCM = "documents/office_apache_poi/document_SimpleMacro.docm"
DDE_CSV = "documents/malicious/office_dde_macro_ole/msodde_dde-in-csv.csv"
ENCRYPTED_PDF = "documents/pdf/encrypted/pypdf-encryption/r2-user-password.pdf"
ABOUT_INJECTION = "prompt_injection/benign_about_prompt_injection/OWASP_LLM01_PromptInjection.md"


async def _uploaders(database: Path) -> set[str | None]:
    repository = SqliteDocumentRepository(database)
    try:
        return {d.uploaded_by for d in await repository.list(EMBEDDED_TENANT)}
    finally:
        await repository.close()


def _table(out: str) -> dict[str, list[str]]:
    """The table's rows by file name: outcome, state and detail."""
    lines = out.splitlines()
    assert lines[0].split() == ["FILE", "OUTCOME", "STATE", "DETAIL"]
    rows = {}
    for line in lines[1:]:
        file, outcome, state, *detail = line.split(maxsplit=3)
        rows[Path(file).name] = [outcome, state, *detail]
    return rows


async def _search(data_dir: Path, prompt: str, **claims: str) -> list[tuple[str, str]]:
    """Search the embedded host over MCP as a dev-token caller with ``claims``."""
    token = load_or_create_dev_issuer(data_dir).mint(
        tenant=EMBEDDED_TENANT,
        subject="alice",
        client_app=EMBEDDED_CLIENT_APP,
        now=datetime.now(UTC),
        claims=claims,
        lifetime_s=600,
    )
    async with open_embedded(data_dir) as parts:
        app = build_app(parts, host="127.0.0.1", port=8000)
        async with app.router.lifespan_context(app), mcp_client(app, token) as client:
            found = await client.call_tool("esra_larkspur", {"prompt": prompt})
    assert found.structured_content is not None, found.content
    return [(r["title"], r["source"]) for r in found.structured_content["results"]]


@pytest.mark.external_data
@pytest.mark.integration
def test_every_file_gets_an_outcome_state_and_remedy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Good, refused, quarantined and failed documents each get their row; exit status 1."""
    paths = [
        shared_data(f"{HANDBOOK}/overtime.md"),
        shared_data(LEGACY_DOC),
        shared_data(MACRO_DOCM),
        shared_data(DDE_CSV),
        shared_data(ENCRYPTED_PDF),
        shared_data(ABOUT_INJECTION),
    ]
    status = main(["ingest", "--data-dir", str(tmp_path), *map(str, paths)])
    captured = capsys.readouterr()
    assert status == 1
    rows = _table(captured.out)
    assert rows["overtime.md"] == ["stored", "indexed"]
    assert rows["oleobj_sample_with_calc_embedded.doc"][:2] == ["refused", "-"]
    assert rows["oleobj_sample_with_calc_embedded.doc"][2].startswith(
        "LEGACY_DOC: Legacy .doc files are not supported: convert to .docx"
    )
    assert rows["document_SimpleMacro.docm"][2].startswith("MACRO_ENABLED: ")
    assert rows["msodde_dde-in-csv.csv"][2].startswith("ACTIVE_CONTENT: ")
    assert rows["r2-user-password.pdf"][:2] == ["stored", "failed"]
    assert rows["r2-user-password.pdf"][2].startswith("PASSWORD_PROTECTED: The document is")
    assert rows["OWASP_LLM01_PromptInjection.md"][:2] == ["stored", "quarantined"]
    assert "INJECTION_SUSPECTED" in rows["OWASP_LLM01_PromptInjection.md"][2]
    # Not a terminal: one progress line per file, then the summary.
    assert "\r" not in captured.err
    assert "upload [6/6]" in captured.err
    assert "6 file(s): 1 failed, 1 indexed, 1 quarantined, 3 refused" in captured.err


@pytest.mark.external_data
@pytest.mark.integration
def test_ingested_documents_are_found_through_the_embedded_host(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit 0 when all is indexed; a caller holding the default scope then finds the file,
    and a caller without the scope claim never sees the store."""
    folder = shared_data(HANDBOOK)
    files = [str(folder / "overtime.md"), str(folder / "fmla.md")]
    assert main(["ingest", "--data-dir", str(tmp_path), *files]) == 0
    rows = _table(capsys.readouterr().out)
    assert rows == {"overtime.md": ["stored", "indexed"], "fmla.md": ["stored", "indexed"]}
    prompt = "overtime and compensatory time"
    found = asyncio.run(_search(tmp_path, prompt, document_scopes="general"))
    assert found[0] == ("overtime.md", "Internal documents")
    without_scope = asyncio.run(_search(tmp_path, prompt))
    assert "Internal documents" not in {source for _, source in without_scope}


@pytest.mark.external_data
@pytest.mark.integration
def test_no_index_leaves_documents_pending_and_a_second_upload_is_a_duplicate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--no-index stores pending rows (exit 0); the same file again is refused as a duplicate;
    ``esra worker --once`` then indexes the queue."""
    page = str(shared_data(f"{HANDBOOK}/fmla.md"))
    argv = ["ingest", "--data-dir", str(tmp_path), "--no-index", "--scope", "hr"]
    assert main([*argv, page]) == 0
    assert _table(capsys.readouterr().out)["fmla.md"][:2] == ["stored", "pending"]
    assert main([*argv, page]) == 1
    duplicate = _table(capsys.readouterr().out)["fmla.md"]
    assert duplicate[:2] == ["refused", "-"]
    assert duplicate[2] == "DUPLICATE_DOCUMENT: The same content is already stored as 'fmla.md'."
    assert asyncio.run(_uploaders(tmp_path / STORE_FILE)) == {cli_subject()}
    assert main(["worker", "--data-dir", str(tmp_path), "--once"]) == 0
    found = asyncio.run(_search(tmp_path, "FMLA", document_scopes="hr"))
    assert found[0] == ("fmla.md", "Internal documents")


def test_directories_are_walked_sorted_without_hidden_files(tmp_path: Path) -> None:
    """Recursion, sorted order, hidden files and folders skipped, each file once."""
    (tmp_path / "b").mkdir()
    (tmp_path / ".git").mkdir()
    for name in ("b/z.md", "b/a.md", "c.txt", ".hidden.md", ".git/config.md", "b/.swp.md"):
        (tmp_path / name).write_text("quokka")
    found = collect_files([tmp_path, tmp_path / "c.txt"])
    assert [p.relative_to(tmp_path).as_posix() for p in found] == ["c.txt", "b/a.md", "b/z.md"]
    with pytest.raises(IngestUsageError, match="no such file or directory"):
        collect_files([tmp_path / "absent"])
    (tmp_path / "drafts").mkdir()
    (tmp_path / "drafts" / ".draft.md").write_text("quokka")
    with pytest.raises(IngestUsageError, match="no files to ingest"):
        collect_files([tmp_path / "drafts"])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["ingest", "nowhere.md"], "nowhere.md: no such file or directory"),
        (["ingest", "--tenant", "acme", "x.md"], "serves tenant 'larkspur' only"),
        (["ingest", "--config", "esra.toml", "x.md"], "--config needs --tenant"),
    ],
)
def test_usage_errors_exit_2(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    message: str,
) -> None:
    """A missing path, a tenant the embedded default lacks, --config without --tenant."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.md").write_text("quokka")
    assert main([*argv, "--data-dir", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err


def _configured(directory: Path, snapshot: ConfigSnapshot) -> Path:
    """A deployment serving ``snapshot`` from SQLite files in ``directory / "data"``."""
    (directory / "jwks.json").write_text(json.dumps(idp().jwks()))
    (directory / "tenant.json").write_text(json.dumps(dump_snapshot(snapshot)))
    data = directory / "data"
    data.mkdir()
    build_demo_databases(data, demo_snapshot())
    (data / "document-store").touch()  # the store source's file, not initialised yet
    settings = directory / "esra.toml"
    settings.write_text(
        f'[[issuers]]\nissuer = "{ISSUER}"\naudience = "{AUDIENCE}"\njwks_file = "jwks.json"\n'
        '[[tenants]]\nid = "larkspur"\nconfig = "tenant.json"\ndatabases = "data"\n'
        # Ingest never calls the model, so its key need not be set here.
        '[model]\nkind = "anthropic"\nmodel = "claude-x"\napi_key_env = "ESRA_TEST_UNSET_KEY"\n'
    )
    return settings


async def _initialise(database: Path) -> None:
    repository = SqliteDocumentRepository(database)
    try:
        await repository.initialize()
    finally:
        await repository.close()


def test_configured_tenants_need_a_document_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With --config: an unknown tenant and a tenant without a store are usage errors; a
    tenant with one receives the files."""
    note = tmp_path / "note.md"
    note.write_text("# Saddle sizing\n\nMeasure the sit bones before choosing a saddle.\n")
    (tmp_path / "plain").mkdir()
    (tmp_path / "stored").mkdir()
    plain = ["ingest", "--config", str(_configured(tmp_path / "plain", demo_snapshot()))]
    stored = ["ingest", "--config", str(_configured(tmp_path / "stored", embedded_snapshot()))]
    assert main([*stored, "--tenant", "acme", str(note)]) == 2
    assert "tenant 'acme' has no document store" in capsys.readouterr().err
    assert main([*plain, "--tenant", "larkspur", str(note)]) == 2
    assert "tenant 'larkspur' has no document store" in capsys.readouterr().err
    # A configured store is initialised by an administrator, never by its first ingest.
    assert main([*stored, "--tenant", "larkspur", str(note)]) == 1
    assert "is not initialised" in capsys.readouterr().err
    asyncio.run(_initialise(tmp_path / "stored" / "data" / "document-store"))
    assert main([*stored, "--tenant", "larkspur", str(note)]) == 0
    assert _table(capsys.readouterr().out)["note.md"] == ["stored", "indexed"]


async def test_a_file_over_the_limit_is_refused_without_reading_it_whole(tmp_path: Path) -> None:
    """At most the limit plus one byte is read; the inspection refuses it as too large."""
    big = tmp_path / "big.txt"
    big.write_text("quokka " * 1000)
    await _initialise(tmp_path / "store.db")
    err = io.StringIO()
    (row,) = await ingest(
        [big],
        store=tmp_path / "store.db",
        tenant_id="acme",
        scope="general",
        index=True,
        clock=FakeClock(),
        worker_id="test",
        err=err,
        limits=UploadLimits(max_bytes=100),
    )
    assert (row.outcome, row.state) == ("refused", "-")
    assert row.detail.startswith("TOO_LARGE: ")
    assert not row.ok


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


async def test_a_terminal_gets_one_redrawn_progress_line(tmp_path: Path) -> None:
    """On a TTY the bar is redrawn with carriage returns instead of one line per file."""
    files = []
    for number in range(3):
        path = tmp_path / f"memo-{number}.md"
        path.write_text(f"# Memo {number}\n\nThe quokka count for week {number} is {number * 7}.\n")
        files.append(path)
    await _initialise(tmp_path / "store.db")
    err = _Terminal()
    rows = await ingest(
        files,
        store=tmp_path / "store.db",
        tenant_id="acme",
        scope="general",
        index=True,
        clock=FakeClock(),
        worker_id="test",
        err=err,
    )
    assert [r.state for r in rows] == ["indexed"] * 3
    assert all(r.ok for r in rows)
    progress = err.getvalue()
    assert progress.count("\r") >= 3
    assert "upload [" in progress
    assert "3/3" in progress
    repository = SqliteDocumentRepository(tmp_path / "store.db")
    try:
        assert {d.scope for d in await repository.list("acme")} == {"general"}
    finally:
        await repository.close()


async def test_an_empty_scope_is_refused(tmp_path: Path) -> None:
    """The scope is bound into every search; an empty one could never be read."""
    note = tmp_path / "note.md"
    note.write_text("quokka")
    with pytest.raises(IngestUsageError, match="--scope"):
        await ingest(
            [note],
            store=tmp_path / "store.db",
            tenant_id="acme",
            scope=" ",
            index=False,
            clock=FakeClock(),
            worker_id="test",
            err=io.StringIO(),
        )
