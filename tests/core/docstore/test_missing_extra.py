"""Without the ``documents`` extra a host refuses at start-up, classified, and no sandbox
server process is ever left behind; with it, the server dies with its owner.

The attack: esra-core installed without ``[documents]``; every test touching PDF extraction
left the sandbox server running (``ResourceWarning: subprocess … is still running``). The
missing extra is simulated in a child interpreter: a ``sys.meta_path`` finder hides pypdf and
python-docx from the parent, and shadow packages that fail to import hide pypdf from the
sandbox server the parent starts.
"""

from __future__ import annotations

import gc
import io
import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from esra.core._docstore.extraction import extract
from esra.core._docstore.extras import INSTALL_HINT
from esra.core._docstore.formats import DocumentFormat
from esra.core._docstore.sandbox import ExtractionSandbox
from esra.core._docstore.upload import AcceptedUpload

_BLOCK_IN_PARENT = """
import importlib.abc, sys
class _Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"pypdf", "docx"}:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _Missing())
"""


def _pdf_bytes() -> bytes:
    from pypdf import PdfWriter

    writer = PdfWriter()
    writer.add_blank_page(width=200, height=200)
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def _run(script: str, tmp_path: Path, *, shadow: bool = False) -> dict[str, object]:
    """Run ``script`` in a child with ResourceWarning as an error; return its JSON line."""
    env = dict(os.environ)
    if shadow:
        for package in ("pypdf", "docx"):
            (tmp_path / package).mkdir()
            (tmp_path / package / "__init__.py").write_text(
                f'raise ModuleNotFoundError("No module named {package}", name={package!r})\n'
            )
        env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    (tmp_path / "sample.pdf").write_bytes(_pdf_bytes())
    completed = subprocess.run(  # noqa: S603 - our own interpreter and script
        [sys.executable, "-X", "dev", "-W", "error::ResourceWarning", "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    assert "ResourceWarning" not in completed.stderr, completed.stderr
    assert completed.returncode == 0, completed.stderr
    return dict(json.loads(completed.stdout.strip().splitlines()[-1]))


def test_a_store_host_refuses_to_start_without_the_extra(tmp_path: Path) -> None:
    """``open_tenant_stores`` (what ``esra serve`` composes) raises the classified error,
    naming the install command, before any store or sandbox exists."""
    script = _BLOCK_IN_PARENT + textwrap.dedent(
        """
        import asyncio, json
        from pathlib import Path
        from esra.core._docstore.extras import MissingExtraError, require_document_extra
        from esra.core.testing import FakeClock
        from esra.starlette._stores import open_tenant_stores

        class Audit:
            async def record(self, *args, **kwargs): ...

        async def start():
            async with open_tenant_stores(
                {"t": Path("store.db")}, audit=Audit(), clock=FakeClock()
            ):
                return "started"

        try:
            require_document_extra()
            direct = "passed"
        except MissingExtraError as exc:
            direct = [exc.code.value, str(exc), list(exc.missing)]
        try:
            hosted = asyncio.run(start())
        except MissingExtraError as exc:
            hosted = str(exc)
        print(json.dumps({"direct": direct, "hosted": hosted, "db": Path("store.db").exists()}))
        """
    )
    answer = _run(script, tmp_path)
    direct = answer["direct"]
    assert isinstance(direct, list)
    code, message, missing = direct
    assert code == "ESRA_CONFIGURATION_INVALID"
    assert INSTALL_HINT in message
    assert missing == ["pypdf", "python-docx"]
    assert INSTALL_HINT in str(answer["hosted"])
    assert answer["db"] is False


def test_a_pdf_without_the_extra_is_a_classified_error_and_leaves_no_process(
    tmp_path: Path,
) -> None:
    """The sandbox server announces that pypdf is missing; the caller gets MissingExtraError
    (not a document failure), and the server is reaped: this process has no child left and
    no ResourceWarning is raised, at collection or at exit."""
    script = textwrap.dedent(
        """
        import gc, json, os
        from esra.core._docstore.extraction import extract
        from esra.core._docstore.extras import MissingExtraError
        from esra.core._docstore.formats import DocumentFormat
        from esra.core._docstore.refusals import DocumentRefusedError
        from esra.core._docstore.upload import AcceptedUpload

        from pathlib import Path
        upload = AcceptedUpload(
            display_name="a.pdf", format=DocumentFormat.PDF,
            data=Path("sample.pdf").read_bytes(), sha256="",
        )
        outcomes = []
        for _ in range(2):
            try:
                extract(upload)
                outcomes.append("extracted")
            except MissingExtraError as exc:
                outcomes.append(str(exc))
            except DocumentRefusedError as exc:
                outcomes.append(exc.refusal.value)
        gc.collect()
        try:
            os.waitpid(-1, os.WNOHANG)
            children = "left"
        except ChildProcessError:
            children = "none"
        print(json.dumps({"outcomes": outcomes, "children": children}))
        """
    )
    answer = _run(script, tmp_path, shadow=True)
    outcomes = answer["outcomes"]
    assert isinstance(outcomes, list)
    assert len(outcomes) == 2
    assert all(INSTALL_HINT in outcome for outcome in outcomes), outcomes
    assert answer["children"] == "none"


def test_a_docx_upload_without_the_extra_is_a_classified_error(tmp_path: Path) -> None:
    """A .docx package is checked at upload in the sandbox server, which needs the extra:
    without it the upload gets MissingExtraError (not a refusal of the file), a text file
    is inspected as before, and no server process is left."""
    script = textwrap.dedent(
        """
        import io, json, os, zipfile
        from esra.core._docstore.extras import MissingExtraError
        from esra.core._docstore.upload import inspect_upload

        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            archive.writestr("[Content_Types].xml", "<Types/>")
            archive.writestr("word/document.xml", "<d/>")
        try:
            inspect_upload("a.docx", buffer.getvalue())
            docx = "inspected"
        except MissingExtraError as exc:
            docx = str(exc)
        text = inspect_upload("a.txt", b"hello").format.value
        try:
            os.waitpid(-1, os.WNOHANG)
            children = "left"
        except ChildProcessError:
            children = "none"
        print(json.dumps({"docx": docx, "text": text, "children": children}))
        """
    )
    answer = _run(script, tmp_path, shadow=True)
    assert INSTALL_HINT in str(answer["docx"])
    assert (answer["text"], answer["children"]) == ("txt", "none")


def _upload() -> AcceptedUpload:
    return AcceptedUpload(
        display_name="a.pdf", format=DocumentFormat.PDF, data=_pdf_bytes(), sha256=""
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _server(sandbox: ExtractionSandbox) -> int | None:
    return sandbox.server_pid  # read afresh (a local narrowing would outlive the call)


def test_the_sandbox_server_is_closed_when_its_owner_is() -> None:
    """Leaving the ``with`` block stops and reaps the server at once; a closed sandbox starts
    a fresh server on its next use."""
    with ExtractionSandbox() as sandbox:
        assert extract(_upload(), sandbox=sandbox).labels == ("page 1",)
        first = sandbox.server_pid
        assert first is not None
        assert _alive(first)
    assert _server(sandbox) is None
    assert not _alive(first)
    extract(_upload(), sandbox=sandbox)
    second = _server(sandbox)
    assert second is not None
    assert second != first
    sandbox.close()
    assert not _alive(second)


def test_a_dropped_sandbox_stops_its_server_without_a_resource_warning() -> None:
    """An owner that forgets ``close()``: the finalizer stops and reaps the server when the
    sandbox is collected, so Popen never warns that it is still running."""
    sandbox = ExtractionSandbox()
    extract(_upload(), sandbox=sandbox)
    pid = sandbox.server_pid
    assert pid is not None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del sandbox
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]
    assert not _alive(pid)


def test_the_process_wide_sandbox_is_closed_at_exit(tmp_path: Path) -> None:
    """``extract`` without a sandbox uses the process-wide one; the interpreter's exit stops
    and reaps it, with no ResourceWarning."""
    script = textwrap.dedent(
        """
        import json
        from esra.core._docstore.extraction import extract
        from esra.core._docstore.formats import DocumentFormat
        from esra.core._docstore.sandbox import default_sandbox
        from esra.core._docstore.upload import AcceptedUpload

        from pathlib import Path
        data = Path("sample.pdf").read_bytes()
        upload = AcceptedUpload(
            display_name="a.pdf", format=DocumentFormat.PDF, data=data, sha256=""
        )
        labels = extract(upload).labels
        print(json.dumps({"labels": list(labels), "server": default_sandbox().server_pid}))
        """
    )
    answer = _run(script, tmp_path)
    assert answer["labels"] == ["page 1"]
    server = answer["server"]
    assert isinstance(server, int)
    assert not _alive(server)


@pytest.mark.parametrize("module", ["pypdf", "docx"])
def test_the_start_up_check_names_each_missing_reader(module: str, tmp_path: Path) -> None:
    """Each reader of the extra is checked, by its distribution's name."""
    script = _BLOCK_IN_PARENT.replace('{"pypdf", "docx"}', repr({module})) + textwrap.dedent(
        """
        import json
        from esra.core._docstore.extras import MissingExtraError, require_document_extra
        try:
            require_document_extra()
            print(json.dumps({"missing": []}))
        except MissingExtraError as exc:
            print(json.dumps({"missing": list(exc.missing)}))
        """
    )
    expected = {"pypdf": ["pypdf"], "docx": ["python-docx"]}[module]
    assert _run(script, tmp_path)["missing"] == expected


@pytest.mark.parametrize("command", [["worker", "--once"], ["serve", "--port", "0"]])
def test_the_cli_names_the_extra_instead_of_a_traceback(tmp_path: Path, command: list[str]) -> None:
    """``esra worker`` / ``esra serve`` on the embedded default (which has a store) without
    the extra exit 1 with the install command on stderr, not a traceback."""
    script = _BLOCK_IN_PARENT + (
        "from esra.starlette._cli import main\nsys.exit(main(sys.argv[1:]))\n"
    )
    completed = subprocess.run(  # noqa: S603 - our own interpreter and CLI
        [sys.executable, "-c", script, *command, "--data-dir", str(tmp_path / "data")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 1, completed.stderr
    assert INSTALL_HINT in completed.stderr
    assert "Traceback" not in completed.stderr
