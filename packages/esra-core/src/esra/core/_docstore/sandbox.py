"""The client side of the extraction sandbox server (``_sandbox_server``), and its lifetime.

Every PDF and DOCX is parsed there, each in a limited child process of its own: pypdf and
python-docx (with lxml) read untrusted bytes, and a document that exhausts their time or
memory, or crashes them, must fail alone and classified, never take the worker with it.
Upload inspection's zip and XML checks of a ``.docx`` run there too
(``check_docx_package``), so that a hostile package never costs the upload process more than
a request and an answer.

One server per owner, one request at a time, restarted when it dies (or when this process
was forked). The server process is always reaped: ``close()`` (or leaving the ``with``
block) ends it deterministically, a garbage-collected sandbox ends it through a finalizer,
and the process-wide default used by ``extract`` is closed at interpreter exit. A server
that dies is reaped at once, never just killed and dropped. The server announces itself
with one line before serving; if it cannot import pypdf or python-docx (the ``documents``
extra is not installed) it says so and exits, and the caller gets ``MissingExtraError``, not
a document failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import threading
import weakref
from collections.abc import Mapping
from types import TracebackType

import attrs

from esra.core._docstore.extras import MissingExtraError
from esra.core._docstore.formats import DocumentFormat
from esra.core._docstore.refusals import Breach, DocumentRefusedError
from esra.core._docstore.zipguard import ZipLimits
from esra.core.codes import DocumentRefusal

__all__ = ["ExtractionSandbox", "SandboxLimits", "answer_refusal", "default_sandbox"]

# How long a server may take to import its readers and announce itself, and to exit once its
# input closes, before it is killed: safety nets, far above what either takes.
_ANNOUNCE_TIMEOUT_S = 60.0
_STOP_TIMEOUT_S = 5.0
# The server's name for upload inspection's checks of a .docx package (not a reader).
PACKAGE_CHECK = "docx_package"


@attrs.frozen
class SandboxLimits:
    """Limits of the child process one document (PDF or DOCX) is extracted in, or a .docx
    package checked in at upload; ``max_chars`` bounds an extraction's text. A breach fails
    the document as ``MALFORMED_DOCUMENT``."""

    memory_bytes: int = 768 * 1024 * 1024
    cpu_seconds: int = 30
    wall_seconds: float = 60.0
    max_chars: int = 32 * 1024 * 1024


def _stop(server: subprocess.Popen[bytes]) -> None:
    """End ``server`` and reap it: closing its input ends its loop; kill it if it lingers."""
    with contextlib.suppress(OSError):
        if server.stdin is not None:
            server.stdin.close()
    try:
        server.wait(timeout=_STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
    if server.stdout is not None:
        server.stdout.close()


def answer_refusal(answer: Mapping[str, object]) -> DocumentRefusedError:
    """A sandbox child's refusal: its reason and breach when they are ours to name, else
    ``MALFORMED_DOCUMENT`` (a child that died or answered out of shape)."""
    try:
        refusal = DocumentRefusal(str(answer.get("refusal")))
    except ValueError:
        refusal = DocumentRefusal.MALFORMED_DOCUMENT
    try:
        breach = Breach(str(answer["breach"])) if answer.get("breach") is not None else None
    except ValueError:
        breach = None
    return DocumentRefusedError(refusal, detail=str(answer.get("detail", "")), breach=breach)


def _announcement(server: subprocess.Popen[bytes]) -> dict[str, object] | None:
    assert server.stdout is not None
    ready, _, _ = select.select([server.stdout], [], [], _ANNOUNCE_TIMEOUT_S)
    if not ready:
        return None
    try:
        answer = json.loads(server.stdout.readline() or b"null")
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None


class ExtractionSandbox:
    """An extraction sandbox server owned by whoever holds this object; close it when done."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._server: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize[[subprocess.Popen[bytes]], ExtractionSandbox] | None = (
            None
        )
        self._owner = 0
        # Servers inherited across a fork belong to the parent: kept, never stopped here.
        self._inherited: list[subprocess.Popen[bytes]] = []
        self.peak_rss_kb = 0

    def __enter__(self) -> ExtractionSandbox:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def server_pid(self) -> int | None:
        """The running server's process id, if one is running for this process."""
        server = self._server
        return server.pid if server is not None and self._owner == os.getpid() else None

    def close(self) -> None:
        """Stop and reap the server, if one runs; the next ``extract`` starts a new one."""
        with self._lock:
            self._drop()

    def _drop(self) -> None:
        if self._server is None:
            return
        if self._owner == os.getpid():
            if self._finalizer is not None:
                self._finalizer()  # runs _stop once, and never again at exit
        else:
            self._inherited.append(self._server)
            if self._finalizer is not None:
                self._finalizer.detach()
        self._server, self._finalizer = None, None

    def _start(self) -> subprocess.Popen[bytes] | None:
        """A new server that announced itself ready, or None when it died first.

        Raises:
            MissingExtraError: the server cannot import pypdf or python-docx.
        """
        env = {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "PATH": os.defpath}
        server = subprocess.Popen(
            [sys.executable, "-m", "esra.core._docstore._sandbox_server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        announced = _announcement(server)
        if announced is not None and announced.get("ready") is True:
            return server
        _stop(server)
        missing = announced.get("missing") if announced is not None else None
        if isinstance(missing, list) and missing:
            raise MissingExtraError(tuple(str(name) for name in missing))
        return None

    def _ensure(self) -> subprocess.Popen[bytes] | None:
        server = self._server
        if server is not None and self._owner == os.getpid() and server.poll() is None:
            return server
        self._drop()
        server = self._start()
        if server is not None:
            self._server, self._owner = server, os.getpid()
            self._finalizer = weakref.finalize(self, _stop, server)
        return server

    def extract(
        self,
        data: bytes,
        limits: SandboxLimits,
        *,
        reader: DocumentFormat,
        options: Mapping[str, object] | None = None,
    ) -> dict[str, object]:
        """Send one document to the server, to be read as ``reader`` (PDF or DOCX) with that
        reader's ``options``; its answer, or a refusal when the server died.

        Raises:
            MissingExtraError: the server cannot import pypdf or python-docx.
        """
        return self._request(reader.value, data, limits, options)

    def check_docx_package(
        self, data: bytes, limits: SandboxLimits, zip_limits: ZipLimits
    ) -> dict[str, object]:
        """Run upload inspection's zip and XML checks of a ``.docx`` (``inflate_members``
        under ``zip_limits``, then ``check_docx_members``) in a child under ``limits``.

        Returns ``{"checked": true}``, or a refusal (``{"refusal", "detail", "breach"}``:
        the checks' own, or ``MALFORMED_DOCUMENT`` when the child exhausted a limit or died).

        Raises:
            MissingExtraError: the server cannot import pypdf or python-docx.
        """
        return self._request(PACKAGE_CHECK, data, limits, {"zip": attrs.asdict(zip_limits)})

    def _request(
        self,
        reader: str,
        data: bytes,
        limits: SandboxLimits,
        options: Mapping[str, object] | None,
    ) -> dict[str, object]:
        header = {
            "reader": reader,
            "options": dict(options or {}),
            "size": len(data),
            "memory": limits.memory_bytes,
            "cpu": limits.cpu_seconds,
            "wall": limits.wall_seconds,
            "chars": limits.max_chars,
        }
        with self._lock:
            server = self._ensure()
            if server is None:
                return {"refusal": "MALFORMED_DOCUMENT", "detail": "sandbox server did not start"}
            assert server.stdin is not None
            assert server.stdout is not None
            try:
                # Header and bytes written apart: an upload's 25 MB are not copied to join them.
                server.stdin.write(json.dumps(header).encode() + b"\n")
                server.stdin.write(data)
                server.stdin.flush()
                line = server.stdout.readline()
                answer = json.loads(line) if line else None
            except (OSError, ValueError):
                answer = None
            if not isinstance(answer, dict):
                # The server itself died: this document fails, the next request restarts it.
                self._drop()
                return {"refusal": "MALFORMED_DOCUMENT", "detail": "sandbox server died"}
            peak = answer.get("sandbox_peak_kb")
            if isinstance(peak, int):
                self.peak_rss_kb = max(self.peak_rss_kb, peak)
            return answer


_DEFAULT = ExtractionSandbox()


def default_sandbox() -> ExtractionSandbox:
    """The process-wide sandbox ``extract`` uses unless given one; closed at exit."""
    return _DEFAULT
