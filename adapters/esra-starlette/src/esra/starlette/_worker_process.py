"""One worker of ``esra serve --workers N``: ``python -m esra.starlette._worker_process``.

Started by ``esra.starlette._workers.WorkerSupervisor`` only, with a ready pipe and a
lifeline pipe inherited as file descriptors. It composes the host from the same settings
through the ``esra serve`` path (``esra.starlette._cli.host_server``), serves on a socket of
its own in the port's SO_REUSEPORT group (``esra.starlette._workers.worker_listener``) until
told to stop, and stops by itself when the lifeline reaches end
of file (the parent is gone). It lives apart from the supervisor because it needs the
command line's composition, and the command line needs the supervisor.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from esra.starlette._workers import READY, worker_listener

__all__ = ["worker_main"]


def _worker_arguments(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="esra serve worker")
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ready-fd", type=int, required=True)
    parser.add_argument("--lifeline-fd", type=int, required=True)
    return parser.parse_args(argv)


def worker_main(argv: Sequence[str] | None = None) -> int:
    """One worker: serve the settings on its own socket in the port's SO_REUSEPORT group
    until told to stop."""
    import asyncio  # noqa: PLC0415 - the parent never needs the worker's imports

    from esra.starlette import _cli as cli  # noqa: PLC0415
    from esra.starlette._event_loop import run_serving  # noqa: PLC0415
    from esra.starlette._settings import SettingsError  # noqa: PLC0415

    args = _worker_arguments(sys.argv[1:] if argv is None else argv)
    listener = worker_listener(args.host, args.port)
    serve_args = argparse.Namespace(
        config=args.config,
        host=args.host,
        port=args.port,
        insecure_dev_anonymous=False,
        data_dir=None,
    )
    try:
        server = cli.host_server(serve_args)
    except (SettingsError, ValueError) as exc:  # the parent read the same file: rare
        sys.stderr.write(f"esra: serve: {args.config}: {exc}\n")
        return cli.EXIT_USAGE
    cli.configure_serve_logging()
    # A signal before uvicorn listens (while the parts open) asks the server not to start;
    # the same handler is what uvicorn re-raises the signal to once it has shut down, so
    # the parts close and the worker exits 0 instead of dying by the default action.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda number, frame: server.stop())

    async def serve() -> None:
        loop = asyncio.get_running_loop()
        # End of file on the lifeline: the parent is gone, and so is its supervision.
        loop.add_reader(args.lifeline_fd, server.stop)
        announcing = asyncio.ensure_future(_announce(server.started, args.ready_fd))
        try:
            await server.serve(sockets=[listener])
        finally:
            announcing.cancel()
            loop.remove_reader(args.lifeline_fd)

    return cli.run_host_server(lambda: run_serving(serve))


async def _announce(started: threading.Event, ready_fd: int) -> None:
    """Tell the parent once uvicorn accepts on the socket."""
    import asyncio  # noqa: PLC0415

    try:
        while not started.is_set():
            await asyncio.sleep(0.05)
        os.write(ready_fd, READY)
    finally:
        os.close(ready_fd)


if __name__ == "__main__":  # pragma: no cover - run by WorkerSupervisor in a new process
    raise SystemExit(worker_main())
