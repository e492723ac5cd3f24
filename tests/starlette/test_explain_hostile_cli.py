"""``esra explain`` with a hostile caller: a usage error, never an explanation.

The command names its caller from the command line; like the admin API it explains only a
caller a token could make. A claim every token is stripped of, a tenant claim naming another
tenant than the one explained, or a subject with a line break (which would otherwise be
written into the ``esra.explain`` record) is refused with exit status 2 and no JSON.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from esra.starlette._cli import main
from esra.starlette._embedded import EMBEDDED_TENANT
from esra.starlette._issuers import DEFAULT_TENANT_CLAIM

EXPOSURE = "larkspur"


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        pytest.param(["--as", "esra.tenant_id=tenant-x"], "esra.tenant_id", id="reserved"),
        pytest.param(["--as", "exp=1"], "exp", id="per-token-claim"),
        pytest.param(
            ["--as", f"{DEFAULT_TENANT_CLAIM}=some-other-tenant"],
            DEFAULT_TENANT_CLAIM,
            id="other-tenant",
        ),
        pytest.param(["--as", "region=emea\x1b[2J"], "region", id="escape-in-value"),
        pytest.param(["--subject", "alice\nexplained_subject=bob"], "subject", id="newline"),
        pytest.param(["--subject", ""], "subject", id="empty-subject"),
    ],
)
def test_a_caller_no_token_could_make_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], named: str
) -> None:
    data = str(tmp_path / "home")
    status = main(["explain", "leave", "--exposure", EXPOSURE, *argv, "--data-dir", data])
    out, err = capsys.readouterr()

    assert status == 2
    assert out == ""
    assert named in err
    if not (tmp_path / "home" / "state.db").exists():
        return  # refused before the host's parts were opened: nothing ran, nothing recorded
    audit = ["audit", "--data-dir", data, "--tenant", EMBEDDED_TENANT, "--event", "esra.explain"]
    assert main(audit) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["outcome"] for r in records] == ["failed"]
    assert "explained_subject" not in records[0]["dimensions"]
