"""The portal in a real browser: Debian's Chromium, driven by Playwright, against uvicorn.

One operator's afternoon, end to end: sign in as a manager, enable and initialise the store
(watching Initializing poll itself to Ready), upload three real documents of which one is
refused, read each file's outcome, run the ingestion worker and see the counts change,
review and release the quarantined document, then sign in as a read-only operator and find
no download link. Keyboard and labelling are checked on the way. Screenshots are saved to
``$ESRA_TEST_ARTIFACTS/portal`` (default: the test's tmp_path) and the folder is printed.

Chromium is the system's (``/usr/bin/chromium``); Playwright never downloads a browser.
Without it the test skips, except under ``CI=true``, where its absence is a failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.routing import Mount

from esra.core._docstore.ingestion import IngestionWorker
from esra.core._docstore.lifecycle import StoreInitialisationError
from esra.core.testing import FakeClock, InMemoryAuditSink
from esra.sqlite import SqliteDocumentRepository
from esra.starlette._auth import JwtVerifier
from esra.starlette._log_redaction import uvicorn_log_config
from esra.starlette._portal import portal_app
from esra.starlette._serve import AnnouncingServer, free_port
from tests._external import shared_data
from tests.starlette._tokens import NOW, idp
from tests.starlette.portal._site import (
    TENANT,
    manager_token,
    reader_token,
    sqlite_repository,
    tenant_store,
)

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = [pytest.mark.integration, pytest.mark.external_data]

CHROMIUM = Path("/usr/bin/chromium")
POLICY = "documents/markdown_policies_18F_handbook/travel-and-leave/fmla.md"
LEGACY_DOC = "documents/textract_with_expected_text/doc/raw_text.doc"
ABOUT_INJECTION = "prompt_injection/benign_about_prompt_injection/OWASP_LLM01_PromptInjection.md"
# Generous: a shared CI machine can be slow; nothing here measures time.
WAIT_MS = 30_000


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("CI") == "true":
        pytest.fail(f"browser test cannot run under CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's Chromium under Playwright (never a downloaded browser)."""
    if not CHROMIUM.exists():
        _unavailable(f"{CHROMIUM} is not installed (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright package is not installed")
    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


class PortalServer:
    """The portal at ``/portal`` over a SQLite store, under uvicorn in a background thread.

    The store starts Disabled. Its initialisation waits for ``release_initialisation`` so
    the browser sees Initializing before Ready.
    """

    def __init__(self, database: Path) -> None:
        self.database = database
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/portal"
        self.started = threading.Event()
        self._initialisation_gate = threading.Event()
        self._server: AnnouncingServer | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._serve()), daemon=True)

    def release_initialisation(self) -> None:
        """Let the held initialisation run."""
        self._initialisation_gate.set()

    async def _serve(self) -> None:
        clock = FakeClock(NOW)
        gate = self._initialisation_gate

        async def held_initialisation() -> None:
            if not await asyncio.to_thread(gate.wait, WAIT_MS / 1000):
                raise StoreInitialisationError("held", "The test never released it.")
            await sqlite_repository(store).initialize()

        store = tenant_store(
            self.database, audit=InMemoryAuditSink(), clock=clock, initialiser=held_initialisation
        )
        portal = portal_app(
            stores={TENANT: store}, verifier=JwtVerifier([idp().trusted()], clock=clock)
        )
        app = Starlette(routes=[Mount("/portal", app=portal)])
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            lifespan="off",
            ws="none",
            log_config=uvicorn_log_config(),  # as esra serve logs: no credential in a line
        )
        self._server = AnnouncingServer(config, self.started)
        try:
            await self._server.serve()
        finally:
            gate.set()
            await store.lifecycle.wait()
            await sqlite_repository(store).close()

    @contextlib.contextmanager
    def running(self) -> Iterator[PortalServer]:
        """Serve until the block ends."""
        self._thread.start()
        try:
            assert self.started.wait(timeout=WAIT_MS / 1000), "uvicorn did not start"
            yield self
        finally:
            self.release_initialisation()
            if self._server is not None:
                self._server.should_exit = True
            self._thread.join(timeout=WAIT_MS / 1000)
            assert not self._thread.is_alive()


def _ingest(database: Path) -> None:
    """One ingestion turn from a separate worker, as ``esra worker`` runs beside the host.

    It runs in a thread of its own: Playwright's sync API already drives an event loop here.
    """

    async def turn() -> None:
        repository = SqliteDocumentRepository(database)
        try:
            await IngestionWorker(
                repository, worker_id="browser-test", clock=FakeClock(NOW)
            ).run_turn()
        finally:
            await repository.close()

    worker = threading.Thread(target=lambda: asyncio.run(turn()))
    worker.start()
    worker.join(timeout=WAIT_MS / 1000)
    assert not worker.is_alive(), "the ingestion turn did not finish"


class Shots:
    """Saves numbered screenshots of the page into the artifacts folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._taken = 0
        folder.mkdir(parents=True, exist_ok=True)

    def __call__(self, page: Page, name: str) -> None:
        self._taken += 1
        page.screenshot(path=self.folder / f"{self._taken:02d}-{name}.png", full_page=True)


def _unlabelled_controls(page: Page) -> list[str]:
    """Visible form controls without an associated label (should always be none)."""
    found: list[str] = page.evaluate(
        """() => [...document.querySelectorAll(
              'input:not([type=hidden]), textarea, select')]
            .filter(e => !e.labels || e.labels.length === 0)
            .map(e => e.outerHTML)"""
    )
    return found


def _count(page: Page, label: str) -> int:
    text = page.get_by_role("navigation", name="Documents by state").inner_text()
    match = re.search(rf"{label}: (\d+)", text)
    assert match, (label, text)
    return int(match.group(1))


def _sign_in(page: Page, url: str, token: str) -> None:
    page.goto(url + "/")
    assert "/portal/sign-in" in page.url
    page.get_by_label("Bearer token").fill(token)
    page.get_by_role("button", name="Sign in").click()


def _initialise_store(page: Page, server: PortalServer, shots: Shots) -> None:
    """Enable, then initialise: Initializing polls itself (meta refresh) until Ready."""
    from playwright.sync_api import expect

    expect(page.get_by_role("heading", level=1)).to_have_text("Store status")
    expect(page.locator(".badge")).to_have_text("Disabled")
    shots(page, "store-disabled")
    page.get_by_role("button", name="Enable the store").click()
    page.get_by_role("button", name="Initialise the store").click()
    expect(page.locator(".badge")).to_have_text("Initializing")
    assert page.locator('meta[http-equiv="refresh"]').count() == 1
    shots(page, "store-initializing")
    server.release_initialisation()
    # No reload from the test: the page's own refresh must bring Ready.
    expect(page.locator(".badge")).to_have_text("Ready", timeout=WAIT_MS)
    shots(page, "store-ready")


def _upload_three(page: Page, files: list[Path], shots: Shots) -> None:
    """Keyboard to the labelled file control, upload, read each file's own outcome."""
    from playwright.sync_api import expect

    page.get_by_role("link", name="Upload").click()
    # The click returns once the navigation starts: a Tab before the new page has loaded
    # lands on the old one's body.
    expect(page.get_by_role("heading", name="Upload documents")).to_be_visible()
    page.wait_for_load_state()
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to main content"
    for _ in range(12):
        if page.evaluate("document.activeElement.id") == "files":
            break
        page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "files"
    assert _unlabelled_controls(page) == []
    page.get_by_label("Files to upload").set_input_files(files)
    page.get_by_role("button", name="Upload", exact=True).click()

    expect(page.get_by_role("status")).to_have_text("3 files: 2 stored, 1 refused.")
    policy_row = page.get_by_role("row", name=re.compile(r"^fmla\.md"))
    expect(policy_row).to_contain_text("Stored")
    expect(policy_row).to_contain_text("Pending")
    refused_row = page.get_by_role("row", name=re.compile(r"^raw_text\.doc"))
    expect(refused_row).to_contain_text("Refused: LEGACY_DOC")
    expect(refused_row).to_contain_text("convert to .docx and retry")
    about_row = page.get_by_role("row", name=re.compile(r"^OWASP_LLM01"))
    expect(about_row).to_contain_text("Stored")
    shots(page, "upload-outcomes")


def _ingest_and_watch_counts(page: Page, server: PortalServer, shots: Shots) -> None:
    """The counts above the list change once the worker has read the files."""
    page.get_by_role("link", name="See all documents").click()
    assert (_count(page, "Pending"), _count(page, "Quarantined")) == (2, 0)
    shots(page, "documents-pending")
    _ingest(server.database)
    page.reload()
    assert (_count(page, "Pending"), _count(page, "Indexed"), _count(page, "Quarantined")) == (
        0,
        1,
        1,
    )
    shots(page, "documents-after-ingestion")


def _review_and_release(page: Page, shots: Shots) -> None:
    """Filter by the Quarantined count, see what matched, release, see it Indexed."""
    from playwright.sync_api import expect

    page.get_by_role("link", name=re.compile(r"^Quarantined: 1")).click()
    expect(page.locator("tbody tr")).to_have_count(1)
    page.get_by_role("link", name="OWASP_LLM01_PromptInjection.md", exact=True).click()
    heading = page.get_by_role("heading", name="What the injection scanner matched")
    expect(heading).to_be_visible()
    # The page lists every rule that matched (in document order); the override is among them.
    override = page.locator(".findings code").filter(has_text=re.compile(r"^instruction_override$"))
    expect(override.first).to_be_visible()
    expect(page.locator("mark").filter(has_text="ignore previous guidelines").first).to_be_visible()
    shots(page, "quarantine-review")
    release = page.get_by_role("button", name=re.compile(r"^Release "))
    release.click()
    expect(page.get_by_role("status")).to_contain_text("Released from quarantine")
    expect(page.locator(".facts .badge")).to_have_text("Indexed")
    expect(release).to_have_count(0)
    shots(page, "released")
    page.get_by_role("link", name="Documents", exact=True).click()
    assert (_count(page, "Quarantined"), _count(page, "Indexed")) == (0, 2)
    assert page.get_by_role("link", name=re.compile(r"^Download")).count() == 2


def _read_only_view(page: Page, shots: Shots) -> None:
    """Sign out; a reader sees the documents but no download link and no upload."""
    from playwright.sync_api import expect

    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("status")).to_contain_text("You are signed out.")
    page.get_by_label("Bearer token").fill(reader_token())
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("link", name="Documents", exact=True).click()
    expect(page.locator("tbody tr")).to_have_count(2)
    assert page.get_by_role("link", name=re.compile("Download")).count() == 0
    assert page.get_by_role("link", name="Upload").count() == 0
    assert _unlabelled_controls(page) == []
    shots(page, "reader-documents")


def test_operator_journey_in_chromium(browser: Browser, tmp_path: Path) -> None:
    """Sign in, initialise, upload three files (one refused), ingest, release, read-only view."""
    files = [shared_data(POLICY), shared_data(LEGACY_DOC), shared_data(ABOUT_INJECTION)]
    artifacts = Path(os.environ.get("ESRA_TEST_ARTIFACTS") or tmp_path) / "portal"
    shots = Shots(artifacts)
    print(f"portal screenshots: {artifacts}")
    server = PortalServer(tmp_path / "store.db")
    with server.running():
        context = browser.new_context()
        page = context.new_page()
        page.set_default_timeout(WAIT_MS)
        try:
            _sign_in(page, server.url, manager_token())
            _initialise_store(page, server, shots)
            _upload_three(page, files, shots)
            _ingest_and_watch_counts(page, server, shots)
            _review_and_release(page, shots)
            _read_only_view(page, shots)
        except Exception:
            shots(page, "failure")
            raise
        finally:
            context.close()
