"""The real ``esra serve`` process: what it writes to its logs, and how it survives hostile JSON.

Issue 13 item 9: a token in ``?access_token=`` was refused, but uvicorn's access log recorded
it. Item 5: ``"[" * 100000`` to the admin API was a 500 with a RecursionError traceback in
the log and sometimes a reset keep-alive connection. Both are checked against the process
an operator starts, its stdout and stderr read back once it has stopped.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from tests._serve_process import esra_argv, serve_process

pytestmark = pytest.mark.integration


@attrs.define
class ServeProcess:
    """A running ``esra serve`` on 127.0.0.1; ``output`` is filled in once it has stopped."""

    port: int
    data_dir: Path
    output: str = ""

    def connection(self) -> http.client.HTTPConnection:
        """A keep-alive HTTP/1.1 connection to the process."""
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)


def dev_token(data_dir: Path, *roles: str) -> str:
    """A development token from ``esra dev-token`` holding ``roles``."""
    argv = ["dev-token", "--tenant", "larkspur", "--subject", "ops", "--data-dir", str(data_dir)]
    for role in roles:
        argv += ["--role", role]
    done = subprocess.run(esra_argv(*argv), capture_output=True, text=True, check=True)  # noqa: S603
    return done.stdout.strip()


@contextlib.contextmanager
def esra_serve(tmp_path: Path) -> Iterator[ServeProcess]:
    """Start ``esra serve`` (embedded default) and stop it with SIGINT, as Ctrl-C would."""
    data_dir = tmp_path / "esra"
    log = tmp_path / "serve.log"
    log.unlink(missing_ok=True)
    with serve_process(log, "--data-dir", str(data_dir), stop="interrupt") as host:
        served = ServeProcess(port=host.port, data_dir=data_dir)
        yield served
    served.output = log.read_text(encoding="utf-8", errors="replace")


def test_no_credential_in_a_query_string_reaches_the_log(tmp_path: Path) -> None:
    """Credentials in query strings, plain or percent-encoded inside another parameter, never
    appear in the process's output; the access log still records each request line."""
    with esra_serve(tmp_path) as served:
        token = dev_token(served.data_dir, "ESRA_DATA_MANAGE")
        connection = served.connection()
        for target in (
            "/mcp?access_token=SECRET-QUERY-1",
            "/admin/v1/store?state=failed&access_token=SECRET-QUERY-2",
            "/portal/?api_key=SECRET-QUERY-3",
            "/portal/sign-in?next=%2Fportal%2F%3Faccess_token%3DSECRET-QUERY-4",
            f"/admin/v1/store?token={token}",
            f"/admin/v1/store?q={token}",
        ):
            connection.request(
                "GET",
                target,
                headers={
                    "Authorization": "Bearer SECRET-HEADER",
                    "Cookie": "esra_portal_session=SECRET-COOKIE",
                },
            )
            connection.getresponse().read()
        connection.close()
    assert "SECRET" not in served.output
    assert token not in served.output
    assert token.split(".")[1] not in served.output
    # The access log is on and names the requests, parameter names kept.
    assert "GET /mcp?access_token=[redacted] HTTP/1.1" in served.output
    assert "GET /admin/v1/store?state=failed&access_token=[redacted] HTTP/1.1" in served.output
    assert "GET /portal/sign-in?next=[redacted] HTTP/1.1" in served.output


def test_deep_json_keeps_the_connection_and_leaves_no_traceback(tmp_path: Path) -> None:
    """``"[" * 100000`` with the role is a 400 on a connection that then serves the next
    request; without a role a 403; the log holds no traceback."""
    with esra_serve(tmp_path) as served:
        # Tokens first: minting one takes a process, longer than uvicorn's keep-alive timeout.
        tokens = [dev_token(served.data_dir), dev_token(served.data_dir, "SECURITY_MANAGE")]
        connection = served.connection()
        headers = {"Content-Type": "application/json"}
        answers = []
        for token in tokens:
            bearer = {"Authorization": f"Bearer {token}"}
            connection.request(
                "PUT", "/admin/v1/secrets/crm", body=b"[" * 100_000, headers=headers | bearer
            )
            assert connection.sock is not None
            local = connection.sock.getsockname()
            response = connection.getresponse()
            answers.append((response.status, json.loads(response.read())["error"]["code"]))
            assert not response.will_close
            connection.request("GET", "/healthz")
            assert connection.sock.getsockname() == local  # the same TCP connection
            assert connection.getresponse().read() == b'{"status":"ok"}'
        connection.close()
    assert answers == [(403, "ESRA_FORBIDDEN"), (400, "ESRA_INVALID_REQUEST")]
    assert "Traceback" not in served.output
    assert "RecursionError" not in served.output
    assert "ESRA_INTERNAL" not in served.output


def test_sigterm_closes_the_parts_and_exits_0(tmp_path: Path) -> None:
    """A process manager stops a host with SIGTERM. uvicorn re-raises the signal once it has
    shut down; under the default action the process then died (-15) inside the server,
    before its parts — audit sink, pools, telemetry export — were closed. It must end as a
    finished ``esra serve``: parts closed, exit status 0."""
    log = tmp_path / "serve.log"
    with serve_process(log, "--data-dir", str(tmp_path / "esra")) as host:
        host.process.send_signal(signal.SIGTERM)
        assert host.process.wait(timeout=60) == 0, log.read_text(errors="replace")
    assert "Traceback" not in log.read_text(errors="replace")
