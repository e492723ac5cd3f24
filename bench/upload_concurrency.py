"""Upload inspection of ``.docx`` packages run at once: one sandbox server against several.

Every ``.docx`` upload's zip and XML checks run in a child of an extraction sandbox server
(``esra.core._docstore.sandbox``); the host inspects each upload on a thread of its own, as
``upload_files`` does. A server answers one request at a time, so how many servers an owner
keeps decides whether uploads wait for each other. Side by side, in one run, for
``max_servers=1`` (the old single server) and the default (``DEFAULT_MAX_SERVERS``):

1. ``--uploads`` benign packages inspected at once: wall time for all of them;
2. one hostile package (an element of 2 Mi attributes, which its child parses until its CPU
   limit, ``--hostile-cpu`` seconds) and, once it is sent, one benign package: how long the
   benign one waits for its answer.

Then, with ``DEFAULT_MAX_SERVERS`` servers, as many hostile packages from one tenant as there
are servers, and once they are sent one benign package from another tenant: how long it
waits, with the requests naming no holder (every server can go to one tenant, as before
holders) and naming their tenants (one tenant is lent all servers but one).

Each server is started before the clock runs (a warm-up inspection per server), so neither
figure counts interpreter start-up. Times are wall-clock on this machine; the ratios of the
two configurations are what to compare.
"""

from __future__ import annotations

import argparse
import io
import threading
import time
import zipfile
from collections.abc import Callable

from esra.core._docstore.sandbox import DEFAULT_MAX_SERVERS, ExtractionSandbox, SandboxLimits
from esra.core._docstore.zipguard import ZipLimits

_W = b'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
_BODY = b"<w:body>" + b"<w:p><w:r><w:t>Leave policy paragraph.</w:t></w:r></w:p>" * 200
BENIGN_XML = b"<w:document " + _W + b">" + _BODY + b"</w:body></w:document>"


def _docx(document_xml: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", b"<Types/>")
        archive.writestr("word/document.xml", document_xml)
    return buffer.getvalue()


def _hostile() -> bytes:
    attributes = b"".join(b' a%d=""' % i for i in range(2 << 20))
    return _docx(b"<w:document " + _W + attributes + b"/>")


def _check(
    sandbox: ExtractionSandbox, data: bytes, limits: SandboxLimits, holder: str | None = None
) -> None:
    sandbox.check_docx_package(data, limits, ZipLimits(), holder=holder)


def _warm(sandbox: ExtractionSandbox, servers: int) -> None:
    """Start ``servers`` servers (inspections at once force one each)."""
    _at_once([lambda: _check(sandbox, _docx(BENIGN_XML), SandboxLimits())] * servers)


def _at_once(work: list[Callable[[], None]]) -> float:
    threads = [threading.Thread(target=each) for each in work]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - start


def benign_at_once(max_servers: int, uploads: int) -> float:
    """Seconds to inspect ``uploads`` benign packages at once."""
    benign = _docx(BENIGN_XML)
    with ExtractionSandbox(max_servers) as sandbox:
        _warm(sandbox, max_servers)
        return _at_once([lambda: _check(sandbox, benign, SandboxLimits())] * uploads)


def benign_behind_hostile(max_servers: int, hostile_cpu: int) -> float:
    """Seconds one benign package waits for its answer with a hostile one in flight."""
    benign, hostile = _docx(BENIGN_XML), _hostile()
    limits = SandboxLimits(cpu_seconds=hostile_cpu, memory_bytes=2048 << 20)
    with ExtractionSandbox(max_servers) as sandbox:
        _warm(sandbox, max_servers)
        held = threading.Thread(target=_check, args=(sandbox, hostile, limits))
        held.start()
        time.sleep(0.2)  # the hostile request is sent and its child parsing
        start = time.perf_counter()
        _check(sandbox, benign, SandboxLimits())
        waited = time.perf_counter() - start
        held.join()
        return waited


def benign_behind_one_tenants_hostile(*, named: bool, hostile_cpu: int) -> float:
    """Seconds another tenant's benign package waits while one tenant's hostile packages,
    one per server, are in flight; ``named``: the requests name their tenants."""
    benign, hostile = _docx(BENIGN_XML), _hostile()
    limits = SandboxLimits(cpu_seconds=hostile_cpu, memory_bytes=2048 << 20)
    servers = DEFAULT_MAX_SERVERS
    with ExtractionSandbox(servers) as sandbox:
        _warm(sandbox, servers)
        held = [
            threading.Thread(
                target=_check, args=(sandbox, hostile, limits, "tenant-a" if named else None)
            )
            for _ in range(servers)
        ]
        for thread in held:
            thread.start()
        time.sleep(0.5)  # the hostile requests are sent and their children parsing
        start = time.perf_counter()
        _check(sandbox, benign, SandboxLimits(), "tenant-b" if named else None)
        waited = time.perf_counter() - start
        for thread in held:
            thread.join()
        return waited


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--uploads", type=int, default=8, help="benign packages at once")
    parser.add_argument("--hostile-cpu", type=int, default=5, help="the hostile child's CPU limit")
    args = parser.parse_args()
    configurations = (("1 server", 1), (f"{DEFAULT_MAX_SERVERS} servers", DEFAULT_MAX_SERVERS))
    at_once = {name: benign_at_once(n, args.uploads) for name, n in configurations}
    behind = {name: benign_behind_hostile(n, args.hostile_cpu) for name, n in configurations}
    old, new = (name for name, _ in configurations)
    print(f"{args.uploads} benign .docx inspected at once:")
    for name, seconds in at_once.items():
        print(f"  {name:>10}: {seconds:6.2f} s")
    print(f"  ratio {new} / {old}: {at_once[new] / at_once[old]:.2f}")
    print(f"a benign .docx behind one hostile package (CPU limit {args.hostile_cpu} s):")
    for name, seconds in behind.items():
        print(f"  {name:>10}: {seconds:6.2f} s")
    print(f"  ratio {new} / {old}: {behind[new] / behind[old]:.2f}")
    unnamed = benign_behind_one_tenants_hostile(named=False, hostile_cpu=args.hostile_cpu)
    named = benign_behind_one_tenants_hostile(named=True, hostile_cpu=args.hostile_cpu)
    print(
        f"another tenant's benign .docx behind one tenant's {DEFAULT_MAX_SERVERS} hostile "
        f"packages ({DEFAULT_MAX_SERVERS} servers):"
    )
    print(f"  {'no holders':>10}: {unnamed:6.2f} s")
    print(f"  {'tenants':>10}: {named:6.2f} s")
    print(f"  ratio tenants / no holders: {named / unnamed:.2f}")


if __name__ == "__main__":
    main()
