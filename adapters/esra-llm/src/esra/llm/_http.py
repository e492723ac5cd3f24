"""The HTTP exchange the remote model clients share: one JSON POST, bounded and retried.

Transient failures (a refused or reset connection, a timeout, a response cut short, HTTP 429
and 5xx, Anthropic's 529 "overloaded" included) are retried with stamina: bounded attempts,
exponential backoff with jitter, and a server's Retry-After honoured up to a cap, all within
one time budget for the whole call. Any other status is final. Whatever fails, the caller
gets one ``ModelOutputError`` whose message holds no response text, URL or credential, so the
pipeline stage falls back with its warning; the cause stays on the exception chain for the log.
"""

from __future__ import annotations

import asyncio
import email.utils
import itertools
import json
import logging
import math
import re
import sys
import zlib
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import attrs
import httpx
import stamina

from esra.core.exceptions import ModelOutputError
from esra.llm._loopback import is_loopback_host

__all__ = [
    "MAX_JSON_VALUES",
    "MAX_RESPONSE_BYTES",
    "JsonPoster",
    "RetryPolicy",
    "Secret",
    "TransientHTTPError",
    "checked_headers",
    "endpoint_url",
    "retry_after_s",
]

_log = logging.getLogger("esra.llm")

# The longest raw answer the core accepts (esra.core's MAX_ANSWER_CHARS, private to the core;
# a test holds the two equal).
_MAX_ANSWER_CHARS = 200_000
# "\uXXXX", the escape JSON gives any character of the Basic Multilingual Plane. A character
# beyond it escapes as a surrogate pair, twelve bytes, so an answer of more than about 100,000
# escaped emoji is refused: none the core's contracts ask for comes near (a composed answer is
# at most 1,200 characters), and allowing it would double what a hostile body may cost.
_MAX_BYTES_PER_CHAR = 6
# Room for the vendor's envelope around the answer (ids, usage, stop reason, pretty-printing).
_ENVELOPE_BYTES = 64 * 1024

MAX_RESPONSE_BYTES = _MAX_ANSWER_CHARS * _MAX_BYTES_PER_CHAR + _ENVELOPE_BYTES
"""Cap on a response body, and on the memory its decoded text may take (about 1.2 MiB): the
longest answer the core accepts, every character escaped as ``\\uXXXX``. Anything beyond it is
a misbehaving server, and reading it whole would only cost memory."""

MAX_JSON_VALUES = 2 * _MAX_ANSWER_CHARS // 3 + 1_000
"""Cap on a response body's JSON tokens that become Python objects (an array or object
opened, a string, a comma before one more value), counted before it is parsed. The densest
JSON, ``[[],[],...]`` or ``["","",...]``, holds two in every three characters, so the longest
answer holds at most 133,333; the thousand more are the envelope's. The byte cap alone let
4 MiB of ``[{},{},...]`` parse into 1.4 million dicts (about 100 MB); at this count a hostile
body costs a few MiB."""

# Backoff between attempts; like every attempt, a wait counts against the call's timeout_s.
_WAIT_INITIAL_S = 0.2
_WAIT_MAX_S = 2.0
_WAIT_JITTER_S = 0.2

# RFC 9110 token characters for header names; visible ASCII and space for values. Checking
# here means a bad value fails at construction with a message that does not quote it, never
# deep inside the HTTP library with one that might.
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_HEADER_VALUE = re.compile(r"[\x20-\x7e]*")
_ERROR_TYPE = re.compile(r"[a-z_]{1,64}")

# The content codings a response may come in, decoded here with a bound on their output
# (httpx's own decoders inflate each network chunk whole, and a chain of them multiplies the
# ratio: a few hundred bytes of "gzip, gzip" expand to gigabytes before any cap could count
# them). Only these are asked for; any other coding, or a chain of them, is refused.
_ACCEPT_ENCODING = "gzip, deflate"
_GZIP_CODINGS = frozenset({"gzip", "x-gzip"})
_DEFLATE_CODINGS = frozenset({"deflate"})

# Failures of the exchange itself that another attempt may not meet. UnsupportedProtocol,
# LocalProtocolError and the like are configuration faults and are not retried.
_TRANSIENT_EXCEPTIONS = (
    httpx.TimeoutException,
    httpx.NetworkError,
    httpx.RemoteProtocolError,
    TimeoutError,
)


class Secret:
    """A credential the host resolved: sent in a header, never shown by ``repr`` or ``str``."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        if not value or value != value.strip() or not _HEADER_VALUE.fullmatch(value):
            # The value is not quoted: it is a credential.
            msg = "a credential must be printable ASCII without surrounding whitespace"
            raise ValueError(msg)
        self._value = value

    def reveal(self) -> str:
        """Return the credential, for the one header that carries it."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__


def checked_headers(headers: Mapping[str, str] | None) -> dict[str, Secret]:
    """Return extra headers with their values kept as secrets (they often carry tokens).

    Raises:
        ValueError: a name is not an HTTP token or a value is not visible ASCII (unquoted).
    """
    checked: dict[str, Secret] = {}
    for name, value in (headers or {}).items():
        if not _HEADER_NAME.fullmatch(name):
            msg = "an extra header name is not a valid HTTP token"
            raise ValueError(msg)
        checked[name] = Secret(value)
    return checked


def endpoint_url(base_url: str, path: str, *, allow_insecure_http: bool = False) -> str:
    """Return ``base_url`` + ``path`` after checking the base is a plain http(s) URL.

    Credentials, a query or a fragment in the base URL are refused: a key belongs in its
    header (never in a URL that logs and reprs show), and a query would be lost anyway.
    Plain http is refused unless the host is this machine (``esra.llm._loopback``) or
    ``allow_insecure_http`` says cleartext is intended: every request carries the key and the
    tenant's prompts. No refusal quotes the URL.
    """
    try:
        url = httpx.URL(base_url)
    except httpx.InvalidURL as exc:
        msg = "base_url is not a valid URL"
        raise ValueError(msg) from exc
    if url.scheme not in {"http", "https"} or not url.host:
        msg = "base_url must be an http or https URL with a host"
        raise ValueError(msg)
    if url.userinfo or url.query or url.fragment:
        msg = "base_url must not carry credentials, a query or a fragment"
        raise ValueError(msg)
    if url.scheme == "http" and not allow_insecure_http and not is_loopback_host(url.host):
        msg = (
            "base_url must use https: plain http would send the key and the prompts in "
            "cleartext, and is allowed only to a loopback host (127.0.0.0/8, ::1, localhost) "
            "unless allow_insecure_http=True"
        )
        raise ValueError(msg)
    return base_url.rstrip("/") + path


class TransientHTTPError(Exception):
    """A response worth another attempt (429 or 5xx): its status and Retry-After only."""

    def __init__(self, status: int, retry_after: float | None) -> None:
        super().__init__(f"model endpoint answered HTTP {status}")
        self.status = status
        self.retry_after = retry_after


def retry_after_s(headers: httpx.Headers, *, now: datetime | None = None) -> float | None:
    """Return how long the server asked to wait before the next attempt, in seconds.

    Reads ``retry-after-ms`` (which OpenAI's and Anthropic's own SDKs honour) first, then
    ``Retry-After`` as seconds or an HTTP date. Anything unreadable, negative or infinite
    counts as absent.
    """
    millis = _seconds(headers.get("retry-after-ms"))
    if millis is not None:
        return millis / 1000
    raw = headers.get("retry-after")
    if raw is None:
        return None
    seconds = _seconds(raw)
    if seconds is not None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(raw.strip())
    except (TypeError, ValueError, IndexError, OverflowError):
        # OverflowError: a year, hour or zone offset too large for a C integer.
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def _seconds(raw: str | None) -> float | None:
    if raw is None:
        return None
    try:
        value = float(raw.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


@attrs.frozen
class RetryPolicy:
    """Which failures get another attempt, and how long a server may ask us to wait."""

    attempts: int = attrs.field(validator=attrs.validators.ge(1))
    retry_after_cap_s: float = attrs.field(validator=attrs.validators.ge(0.0))

    def backoff(self, exc: BaseException) -> bool | float:
        """stamina's backoff hook: False to give up, True to back off, seconds to wait
        (any ``BaseException``, as stamina 26.2 types the hook: a cancellation gives up)."""
        if isinstance(exc, TransientHTTPError):
            if exc.retry_after is not None:
                return min(exc.retry_after, self.retry_after_cap_s)
            return True
        return isinstance(exc, _TRANSIENT_EXCEPTIONS)


class JsonPoster:
    """POSTs JSON and returns the parsed JSON of a 2xx answer, or raises ModelOutputError.

    The whole call is bounded by ``timeout_s``: every attempt, body included, every backoff
    and every wait a server asks for (httpx's own timeouts are per read, so a server dripping
    bytes could otherwise hold a stage). A per-attempt bound let two retries of a hanging
    endpoint take three times ``timeout_s``, past the invocation deadline the call runs
    under, which then returns no results at all; within its budget, a stage that gives up
    only falls back. A retry starts only while the budget lasts. Redirects are not
    followed, by the owned client or a host's (every request says so itself), and a 3xx is a
    refused request: a credential header must never be replayed to another host. The owned client
    ignores proxy environment variables; a host that needs a proxy, a private CA or mTLS
    passes its own ``http_client``, which it also closes.
    """

    def __init__(
        self,
        *,
        timeout_s: float,
        max_retries: int,
        retry_after_cap_s: float,
        http_client: httpx.AsyncClient | None = None,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        if not (timeout_s > 0 and math.isfinite(timeout_s)):
            msg = "timeout_s must be a positive number of seconds"
            raise ValueError(msg)
        if max_retries < 0:
            msg = "max_retries must not be negative"
            raise ValueError(msg)
        self._policy = RetryPolicy(attempts=max_retries + 1, retry_after_cap_s=retry_after_cap_s)
        self._timeout_s = timeout_s
        self._owns_client = http_client is None
        self._client = http_client or httpx.AsyncClient(trust_env=False, follow_redirects=False)
        self._max_bytes = max_response_bytes

    async def post(
        self,
        url: str,
        *,
        headers: Mapping[str, str],
        payload: Mapping[str, Any],
        params: Mapping[str, str] | None = None,
    ) -> Any:
        """Return the parsed JSON body of a 2xx answer to ``payload`` POSTed at ``url``.

        Raises:
            ModelOutputError: the endpoint refused the request (a 4xx other than 429),
                redirected it (a 3xx, never followed), stayed unavailable through every
                attempt, or answered with something that is not JSON or is too large.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout_s

        def backoff(exc: BaseException) -> bool | float:
            decision = self._policy.backoff(exc)
            if isinstance(decision, bool):
                return decision
            # A wait the budget cannot afford ends the call now, with the server's status,
            # rather than as a timeout after sleeping to no purpose.
            return decision if decision < deadline - loop.time() else False

        try:
            async with asyncio.timeout_at(deadline):
                async for attempt in stamina.retry_context(
                    on=backoff,
                    attempts=self._policy.attempts,
                    timeout=None,
                    wait_initial=_WAIT_INITIAL_S,
                    wait_max=_WAIT_MAX_S,
                    wait_jitter=_WAIT_JITTER_S,
                ):
                    with attempt:
                        return await self._attempt(url, headers, payload, params)
        except ModelOutputError:
            raise
        except (TransientHTTPError, httpx.HTTPError, TimeoutError, OSError) as exc:
            # Only the status or the exception's type: never its text, which may quote a URL.
            cause = (
                f"HTTP {exc.status}" if isinstance(exc, TransientHTTPError) else type(exc).__name__
            )
            msg = f"the model endpoint was unavailable ({cause})"
            raise ModelOutputError(msg) from exc
        # stamina re-raises the last error once attempts run out, so the loop never ends here.
        raise AssertionError("unreachable")  # pragma: no cover

    async def _attempt(
        self,
        url: str,
        headers: Mapping[str, str],
        payload: Mapping[str, Any],
        params: Mapping[str, str] | None,
    ) -> Any:
        async with (
            self._client.stream(
                "POST",
                url,
                # Only the codings _Inflater decodes within the cap (a host's client that has
                # brotli or zstandard installed would otherwise offer those too).
                headers={
                    **{k: v for k, v in headers.items() if k.lower() != "accept-encoding"},
                    "Accept-Encoding": _ACCEPT_ENCODING,
                },
                params=params,
                json=payload,
                timeout=httpx.Timeout(self._timeout_s),
                # Per request, so a host's own client that follows redirects does not either:
                # httpx drops only Authorization on a cross-origin hop, never x-api-key/api-key.
                follow_redirects=False,
            ) as response,
        ):
            status = response.status_code
            if 300 <= status < 400:
                # Never followed and never read: its body is not the model's answer.
                _log.warning(
                    "model endpoint redirected the request: HTTP %d (not followed)", status
                )
                msg = f"the model endpoint answered with a redirect (HTTP {status}), not followed"
                raise ModelOutputError(msg)
            if status == 429 or status >= 500:
                raise TransientHTTPError(status, retry_after_s(response.headers))
            body = await _read_capped(response, self._max_bytes)
        if not 200 <= status < 300:
            # Only the vendor's error type is logged: its message may quote the request.
            _log.warning("model endpoint refused the request: HTTP %d (%s)", status, _kind(body))
            msg = f"the model endpoint refused the request (HTTP {status})"
            raise ModelOutputError(msg)
        return _parsed(body, self._max_bytes)

    async def aclose(self) -> None:
        """Close the HTTP client, unless the host passed its own."""
        if self._owns_client:
            await self._client.aclose()


async def _read_capped(response: httpx.Response, limit: int) -> bytes:
    """Return the decoded body, reading and inflating at most ``limit`` bytes of either.

    The raw bytes are read (``aiter_raw``) and inflated here, never more than the room left
    under the cap per chunk, so a compression bomb costs the cap, not what it expands to.
    """
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large()
    inflater = _inflater(response.headers.get("content-encoding", ""))
    chunks: list[bytes] = []
    raw_size = size = 0
    try:
        async for raw in response.aiter_raw():
            raw_size += len(raw)
            if raw_size > limit:
                raise _too_large()
            chunk = inflater.inflate(raw, limit - size) if inflater is not None else raw
            size += len(chunk)
            if size > limit:
                raise _too_large()
            chunks.append(chunk)
        if inflater is not None:
            tail = inflater.finish(limit - size)
            if size + len(tail) > limit:
                raise _too_large()
            chunks.append(tail)
    except zlib.error as exc:
        msg = "the model endpoint's answer cannot be read"
        raise ModelOutputError(msg) from exc
    return b"".join(chunks)


# One token that becomes a Python object: a JSON string (escapes included, or what is left of
# one the body's end cuts off), or an array or object opened, or a comma before one more value.
# Every path through the string alternative ends in a match, so it never backtracks: linear in
# the body, whatever it holds. Commas and brackets inside a string are part of its match.
_JSON_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)|[\[{,]', re.DOTALL)


def _parsed(body: bytes, limit: int) -> Any:
    """Return the JSON value of ``body`` once its size in Python objects is known bounded.

    Tokens are counted before parsing (``MAX_JSON_VALUES``), and the decoded text is held to
    ``limit`` bytes: one astral character makes the whole text four bytes a character wide.
    Nesting too deep for the parser is a RecursionError, met after a few thousand levels.

    Raises:
        ModelOutputError: too many tokens, text too wide, or not JSON (nothing quoted).
    """
    if _too_many_tokens(body):
        raise _too_large()
    try:
        text = body.decode(json.detect_encoding(body), "surrogatepass")
    except ValueError as exc:
        raise _not_json() from exc
    if sys.getsizeof(text) > limit + sys.getsizeof(""):
        raise _too_large()
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise _not_json() from exc


def _too_many_tokens(body: bytes) -> bool:
    # Counting the characters alone overcounts (a string's quotes pair up, its commas are not
    # tokens) but allocates nothing; a body under the cap by that count needs no scan. Over
    # it, the scan stops at the first token past the cap, so a hostile body is not walked
    # whole.
    rough = (body.count(b'"') + 1) // 2 + sum(body.count(c) for c in (b"[", b"{", b","))
    if rough <= MAX_JSON_VALUES:
        return False
    tokens = _JSON_TOKEN.finditer(body)
    return next(itertools.islice(tokens, MAX_JSON_VALUES, None), None) is not None


def _not_json() -> ModelOutputError:
    return ModelOutputError("the model endpoint's answer is not JSON")


def _too_large() -> ModelOutputError:
    return ModelOutputError("the model endpoint's answer is too large")


def _inflater(header: str) -> _Inflater | None:
    """Return the decoder of a Content-Encoding header's one coding (``None``: identity).

    Raises:
        ModelOutputError: a coding other than gzip or deflate, or more than one.
    """
    codings = [c for c in (part.strip().lower() for part in header.split(",")) if c]
    codings = [c for c in codings if c != "identity"]
    if not codings:
        return None
    if len(codings) == 1 and codings[0] in _GZIP_CODINGS | _DEFLATE_CODINGS:
        return _Inflater(gzip=codings[0] in _GZIP_CODINGS)
    # The codings are not quoted: they are the endpoint's text.
    msg = "the model endpoint's answer is in a content coding that was not asked for"
    raise ModelOutputError(msg)


class _Inflater:
    """Bounded zlib inflation of a gzip or deflate body, chunk by chunk.

    Like httpx's decoder, "deflate" is read as zlib data, or as raw deflate data when its
    first bytes are not zlib's.
    """

    def __init__(self, *, gzip: bool) -> None:
        self._gzip = gzip
        self._fresh = True
        self._obj = zlib.decompressobj(zlib.MAX_WBITS | 16 if gzip else zlib.MAX_WBITS)

    def inflate(self, data: bytes, room: int) -> bytes:
        """Return what ``data`` inflates to, cut at ``room + 1`` bytes: a result longer than
        ``room`` means the body is over the cap, and nothing past that is ever made."""
        try:
            out = self._obj.decompress(data, room + 1)
        except zlib.error:
            if self._gzip or not self._fresh:
                raise
            self._obj = zlib.decompressobj(-zlib.MAX_WBITS)
            out = self._obj.decompress(data, room + 1)
        self._fresh = False
        return out

    def finish(self, room: int) -> bytes:
        """Return what is left once the body has been read, cut at ``room + 1`` bytes."""
        # Every chunk was inflated to its end unless it went over the cap, so nothing waits
        # in the tail; it is cut all the same.
        return self._obj.decompress(self._obj.unconsumed_tail, room + 1)


def _kind(body: bytes) -> str:
    """Return the error type an OpenAI or Anthropic error body names, if it looks like one."""
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return "no JSON error body"
    error = value.get("error") if isinstance(value, dict) else None
    kind = error.get("type") or error.get("code") if isinstance(error, dict) else None
    return kind if isinstance(kind, str) and _ERROR_TYPE.fullmatch(kind) else "unnamed error"
