"""Keeping credentials out of log lines: uvicorn's access log and the host's own logging.

The host refuses a token in the query string (``?access_token=…``), but uvicorn's access log
writes every request line, query included, before anyone looks at it; a token pasted into a
URL would then sit in the log for anyone who reads it. :class:`CredentialRedaction` is a
logging filter, installed on every handler ``esra serve`` writes through, that rewrites a
record before it is formatted:

- in a request target, the value of every query parameter whose name suggests a credential
  (``access_token``, ``api_key``, ``password``, ``code``, ``session``, …), and every value
  that itself carries one once percent-decoded (``next=%2F…%3Faccess_token%3D…``);
- anywhere in a message or a traceback, a JWT-shaped string, a ``Bearer`` credential, the
  value of an ``Authorization``, ``Cookie`` or ``Set-Cookie`` header, and the password of a
  URL's user information (``postgresql://esra:…@db``: a driver's message or a traceback may
  quote a resolved connection string).

Parameter names and the rest of the line stay, so the log still says what was requested.
"""

from __future__ import annotations

import copy
import logging
import re
from typing import Any
from urllib.parse import unquote_plus

import uvicorn.config

__all__ = [
    "REDACTED",
    "CredentialRedaction",
    "redact_request_target",
    "redact_root_handlers",
    "redact_text",
    "uvicorn_log_config",
]

REDACTED = "[redacted]"

# Substrings of a parameter name that mark its value as a credential (names lower-cased).
_CREDENTIAL_NAME_PARTS = (
    "token",
    "secret",
    "password",
    "passwd",
    "key",
    "auth",
    "session",
    "cookie",
    "sig",
    "jwt",
    "assertion",
    "credential",
    "code",
)
_JWT = re.compile(r"eyJ[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*")
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+")
_HEADER = re.compile(
    r"(?i)\b(authorization|proxy-authorization|cookie|set-cookie)(\s*[:=]\s*)[^\r\n]*"
)
# A URL's password: "scheme://user:" up to the last "@" before the host (a password may
# hold "@" and ":"; the user name holds neither, and nothing here spans whitespace or "/").
# A scheme starts only where a word does, so a long word is scanned once, not once per
# letter: the pattern stays linear on whatever a log line holds.
_URL_PASSWORD = re.compile(r"((?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://[^\s/:@]*:)[^\s/]*(?=@)")
# A query parameter inside free text: after "?", "&" or ";", up to a delimiter.
_PARAMETER = re.compile(r"([?&;])([^=&;#\s\"'?]+)=([^&;#\s\"']*)")


def _credential_name(name: str) -> bool:
    lowered = unquote_plus(name).lower()
    return any(part in lowered for part in _CREDENTIAL_NAME_PARTS)


def _redact_parameter(match: re.Match[str]) -> str:
    separator, name, value = match.groups()
    if value and (_credential_name(name) or _carries_credential(unquote_plus(value))):
        value = REDACTED
    return f"{separator}{name}={value}"


def _carries_credential(text: str) -> bool:
    return redact_text(text) != text


def redact_text(text: str) -> str:
    """``text`` with every credential it visibly carries replaced by ``[redacted]``."""
    text = _HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    text = _JWT.sub(REDACTED, text)
    text = _URL_PASSWORD.sub(lambda m: f"{m.group(1)}{REDACTED}", text)
    return _PARAMETER.sub(_redact_parameter, text)


def redact_request_target(target: str) -> str:
    """A request target (path and query) with its credential-bearing values redacted."""
    path, question, query = target.partition("?")
    if not question:
        return redact_text(path)
    # A leading "?" lets the query's first parameter match like the others.
    return redact_text(path) + redact_text("?" + query)


class CredentialRedaction(logging.Filter):
    """Rewrites each record so no credential reaches the formatted line; drops nothing."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if record.name == "uvicorn.access" and isinstance(args, tuple) and len(args) == 5:
            # uvicorn's AccessFormatter reads the request line from the arguments:
            # (client, method, path with query, HTTP version, status).
            record.args = (*args[:2], redact_request_target(str(args[2])), *args[3:])
        else:
            try:
                message = record.getMessage()
            except (TypeError, ValueError):
                # A malformed record: the handler reports it; it carries no readable text.
                return True
            redacted = redact_text(message)
            if redacted != message:
                record.msg, record.args = redacted, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_text(record.exc_text)
        if record.stack_info:
            record.stack_info = redact_text(record.stack_info)
        return True


def uvicorn_log_config() -> dict[str, Any]:
    """uvicorn's default logging configuration with :class:`CredentialRedaction` on both of
    its handlers (the access log and everything else uvicorn writes)."""
    config: dict[str, Any] = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    config.setdefault("filters", {})["credentials"] = {"()": CredentialRedaction}
    for handler in config["handlers"].values():
        handler.setdefault("filters", []).append("credentials")
    return config


def redact_root_handlers() -> None:
    """Install :class:`CredentialRedaction` on every handler of the root logger (once)."""
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, CredentialRedaction) for f in handler.filters):
            handler.addFilter(CredentialRedaction())
