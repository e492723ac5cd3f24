"""The development issuer and ``esra dev-token``: one key per data directory, refused elsewhere."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from esra.core.testing import FakeClock
from esra.starlette._auth import JwtVerifier
from esra.starlette._cli import main
from esra.starlette._devtoken import (
    DEV_KEY_FILE,
    DevIssuerError,
    load_or_create_dev_issuer,
)
from tests.starlette._tokens import NOW


def test_the_key_is_created_once_and_kept_private(tmp_path: Path) -> None:
    """First use creates the key (owner-only); later uses read the same key."""
    first = load_or_create_dev_issuer(tmp_path / "home")
    again = load_or_create_dev_issuer(tmp_path / "home")
    assert first.kid == again.kid
    mode = (tmp_path / "home" / DEV_KEY_FILE).stat().st_mode
    assert stat.S_IMODE(mode) == 0o600
    assert [p.name for p in (tmp_path / "home").iterdir()] == [DEV_KEY_FILE]


def test_a_minted_token_verifies_against_the_trusted_issuer(tmp_path: Path) -> None:
    """The embedded host's TrustedIssuer accepts the token, with its claims."""
    issuer = load_or_create_dev_issuer(tmp_path)
    token = issuer.mint(
        tenant="larkspur",
        subject="alice",
        client_app="demo-client",
        now=NOW,
        claims={"region": ("emea", "amer"), "team": "support"},
    )
    verifier = JwtVerifier([issuer.trusted(frozenset({"larkspur"}))], clock=FakeClock(NOW))
    caller = verifier.authenticate(token)
    assert (caller.tenant_id, caller.client_app_id, caller.subject) == (
        "larkspur",
        "demo-client",
        "alice",
    )
    assert caller.claims["region"] == ("emea", "amer")
    assert caller.claims["team"] == "support"


async def test_a_key_from_another_data_directory_is_not_trusted(tmp_path: Path) -> None:
    """Each data directory has its own key: a token from another one is refused."""
    trusted = load_or_create_dev_issuer(tmp_path / "a").trusted(frozenset({"larkspur"}))
    stranger = load_or_create_dev_issuer(tmp_path / "b")
    token = stranger.mint(tenant="larkspur", subject="eve", client_app="demo-client", now=NOW)
    assert await JwtVerifier([trusted], clock=FakeClock(NOW)).verify_token(token) is None


@pytest.mark.parametrize("name", ["iss", "sub", "exp", "esra_tenant", "azp", "esra.tenant_id"])
def test_reserved_claims_cannot_be_chosen(tmp_path: Path, name: str) -> None:
    """Claims the issuer sets itself (and esra.*) are refused as --claim names."""
    issuer = load_or_create_dev_issuer(tmp_path)
    with pytest.raises(DevIssuerError, match="set by the issuer"):
        issuer.mint(tenant="larkspur", subject="a", client_app="c", now=NOW, claims={name: "x"})


def test_a_damaged_key_file_says_how_to_recover(tmp_path: Path) -> None:
    """A damaged key file is an error naming the remedy, not a traceback."""
    (tmp_path / DEV_KEY_FILE).write_text("{}")
    with pytest.raises(DevIssuerError, match="delete it"):
        load_or_create_dev_issuer(tmp_path)


def test_the_cli_prints_a_token(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``esra dev-token`` prints one token on stdout; repeated --claim makes a list."""
    argv = ["dev-token", "--tenant", "larkspur", "--subject", "alice", "--data-dir", str(tmp_path)]
    assert main([*argv, "--claim", "region=emea", "--claim", "region=amer"]) == 0
    token = capsys.readouterr().out.strip()
    issuer = load_or_create_dev_issuer(tmp_path)
    verifier = JwtVerifier([issuer.trusted(frozenset({"larkspur"}))])
    caller = verifier.authenticate(token)
    assert caller.claims["region"] == ("emea", "amer")
    assert caller.client_app_id == "demo-client"


def test_roles_become_the_admin_roles_claim(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--role`` (repeatable) sets ``esra_roles``, which the admin API reads."""
    argv = ["dev-token", "--tenant", "larkspur", "--subject", "ops", "--data-dir", str(tmp_path)]
    assert main([*argv, "--role", "ESRA_DATA_MANAGE", "--role", "GOVERNANCE_MANAGE"]) == 0
    token = capsys.readouterr().out.strip()
    issuer = load_or_create_dev_issuer(tmp_path)
    caller = JwtVerifier([issuer.trusted(frozenset({"larkspur"}))]).authenticate(token)
    assert caller.claims["esra_roles"] == ("ESRA_DATA_MANAGE", "GOVERNANCE_MANAGE")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--config", "esra.toml"], "exists only in the embedded default"),
        (["--claim", "region"], "NAME=VALUE"),
        (["--claim", "sub=root"], "set by the issuer"),
        (["--lifetime", "0"], "lifetime"),
        (["--role", "ROOT"], "is not a role"),
    ],
)
def test_the_cli_refuses_what_the_embedded_default_would_not_trust(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    """A configured deployment, malformed or reserved claims, a bad lifetime: exit 2."""
    argv = ["dev-token", "--tenant", "larkspur", "--subject", "a", "--data-dir", str(tmp_path)]
    assert main([*argv, *extra]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert message in captured.err


def test_the_cli_refuses_a_tenant_the_embedded_default_does_not_serve(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Only the demo tenant exists in the embedded default."""
    argv = ["dev-token", "--tenant", "acme", "--subject", "a", "--data-dir", str(tmp_path)]
    assert main(argv) == 2
    assert "serves tenant 'larkspur' only" in capsys.readouterr().err
    assert not (tmp_path / DEV_KEY_FILE).exists()
