"""Credential redaction in log records: request targets, headers, tokens, tracebacks."""

from __future__ import annotations

import io
import logging
import sys

import pytest

from esra.starlette._log_redaction import (
    CredentialRedaction,
    redact_request_target,
    redact_root_handlers,
    redact_text,
    uvicorn_log_config,
)

JWT = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl"


@pytest.mark.parametrize(
    ("target", "shown"),
    [
        ("/mcp?access_token=s3cr3t", "/mcp?access_token=[redacted]"),
        ("/x?state=failed&API_KEY=s3cr3t", "/x?state=failed&API_KEY=[redacted]"),
        ("/x?access%5Ftoken=s3cr3t&page=2", "/x?access%5Ftoken=[redacted]&page=2"),
        ("/x?password=a;b=1", "/x?password=[redacted];b=1"),
        ("/x?next=%2Fp%3Fid_token%3Ds3cr3t", "/x?next=[redacted]"),
        (f"/x?q={JWT}", "/x?q=[redacted]"),
        (f"/x/{JWT}", "/x/[redacted]"),
        ("/portal/documents?state=indexed&page=3", "/portal/documents?state=indexed&page=3"),
        ("/healthz", "/healthz"),
    ],
)
def test_request_targets_keep_names_and_lose_credentials(target: str, shown: str) -> None:
    """Credential-named parameters and values carrying a credential are redacted."""
    assert redact_request_target(target) == shown


@pytest.mark.parametrize(
    "text",
    [
        "Authorization: Bearer s3cr3t",
        "authorization=Basic czNjcjN0",
        "Cookie: esra_portal_session=s3cr3t; theme=dark",
        "set-cookie: esra_portal_session=s3cr3t",
        "sent Bearer s3cr3t upstream",
        f"token {JWT} refused",
        "connect to postgresql://esra:s3cr3t@db.internal:5432/esra failed",
        "redis://:s3cr3t@cache:6379/0 unreachable",
        "mysql://root:s3cr3t@10.0.0.5/test?ssl=true",
    ],
)
def test_headers_bearer_values_and_jwts_are_redacted_in_free_text(text: str) -> None:
    """A credential anywhere in a message is replaced; the words around it stay."""
    redacted = redact_text(text)
    assert "s3cr3t" not in redacted
    assert "czNjcjN0" not in redacted
    assert JWT not in redacted
    assert "[redacted]" in redacted


def _handler_output(record: logging.LogRecord) -> str:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(CredentialRedaction())
    handler.handle(record)
    return stream.getvalue()


def test_an_access_record_keeps_uvicorns_argument_shape() -> None:
    """uvicorn's access formatter unpacks five arguments: only the target changes."""
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5000", "GET", "/mcp?access_token=s3cr3t", "1.1", 401),
        None,
    )
    assert CredentialRedaction().filter(record)
    assert record.args == ("127.0.0.1:5000", "GET", "/mcp?access_token=[redacted]", "1.1", 401)


def test_messages_and_tracebacks_are_redacted_before_formatting() -> None:
    """An exception whose text carries a token is logged without it."""
    try:
        raise ValueError(f"cannot decode {JWT}")
    except ValueError:
        record = logging.getLogger("esra.test").makeRecord(
            "esra.test",
            logging.ERROR,
            __file__,
            1,
            "refused %s",
            ("Bearer s3cr3t",),
            exc_info=sys.exc_info(),
        )
    output = _handler_output(record)
    assert "s3cr3t" not in output
    assert JWT not in output
    assert "ValueError: cannot decode [redacted]" in output


def test_uvicorn_config_filters_both_handlers() -> None:
    """The access log and uvicorn's other handler both carry the filter (applied for real by
    ``tests/starlette/test_serve_process.py``)."""
    config = uvicorn_log_config()
    assert {tuple(h["filters"]) for h in config["handlers"].values()} == {("credentials",)}
    assert config["filters"]["credentials"] == {"()": CredentialRedaction}
    assert set(config["handlers"]) == {"default", "access"}


def test_root_handlers_get_the_filter_once() -> None:
    """Installing twice leaves one filter per root handler."""
    root = logging.getLogger()
    handler = logging.StreamHandler(io.StringIO())
    root.addHandler(handler)
    try:
        redact_root_handlers()
        redact_root_handlers()
        assert sum(isinstance(f, CredentialRedaction) for f in handler.filters) == 1
    finally:
        root.removeHandler(handler)
