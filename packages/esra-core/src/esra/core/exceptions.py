"""Every exception ESRA raises, under one root.

Messages are fixed, safe to show a caller, and never contain driver text, SQL, hosts or
configuration internals; the detail that helps an operator goes to the log.
"""

from __future__ import annotations

from esra.core.codes import ErrorCode, ProviderErrorCode

__all__ = [
    "ConfigurationError",
    "DocumentNotFoundError",
    "EsraError",
    "ExposureNotFoundError",
    "FetchQuotaExceededError",
    "InvalidRequestError",
    "ModelOutputError",
    "NoSourcesAvailableError",
    "ProviderError",
    "QuotaUnavailableError",
    "SourceUnavailableError",
    "UnvalidatedQueryError",
]


class EsraError(Exception):
    """Root of every ESRA exception; ``code`` is always from a closed set."""

    code: ErrorCode | ProviderErrorCode = ErrorCode.ESRA_INTERNAL
    public_message: str = "The request could not be completed."

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or self.public_message)


class NoSourcesAvailableError(EsraError):
    """The effective scope is empty: nothing the caller may search is available."""

    code = ErrorCode.ESRA_NO_SOURCES_AVAILABLE
    public_message = "No sources are available for this request."


class ExposureNotFoundError(EsraError):
    """The exposure does not exist, is unpublished, or the caller is outside its audience.

    The three cases are indistinguishable on purpose: a caller who fails the policy must see no
    trace that the tool exists.
    """

    code = ErrorCode.ESRA_EXPOSURE_NOT_FOUND
    public_message = "No such tool."


class DocumentNotFoundError(EsraError):
    """A document reference does not open for this caller: one error for every reason.

    Tampered, truncated, expired, minted for another caller, tenant or exposure, or sealed
    under a retired key — all look the same, and none is a permission error, which would
    confirm that the record exists.
    """

    code = ErrorCode.ESRA_DOCUMENT_NOT_FOUND
    public_message = "No such document."


class QuotaUnavailableError(EsraError):
    """The quota store could not say whether the budget has room (it is unreachable or
    timed out). Governance fails closed: the fetch is refused, never served unmetered."""

    code = ErrorCode.ESRA_QUOTA_UNAVAILABLE
    public_message = (
        "The document-fetch allowance cannot be checked right now, so nothing was fetched; "
        "try again shortly."
    )


class FetchQuotaExceededError(EsraError):
    """The caller's hourly character quota for document fetch would be exceeded."""

    code = ErrorCode.ESRA_FETCH_QUOTA_EXCEEDED
    public_message = (
        "The hourly document-fetch allowance is used up; ask for fewer characters or try later."
    )


class SourceUnavailableError(EsraError):
    """The source holding a document could not be read just now; a later call may succeed."""

    code = ErrorCode.ESRA_SOURCE_UNAVAILABLE
    public_message = "The document's source is unavailable right now."


class InvalidRequestError(EsraError):
    """The caller's request is malformed (for example an empty or oversized prompt)."""

    code = ErrorCode.ESRA_INVALID_REQUEST
    public_message = "The request is invalid."


class ConfigurationError(EsraError):
    """Configuration failed a structural check (cross-tenant reference, unknown field, ...)."""

    code = ErrorCode.ESRA_CONFIGURATION_INVALID
    public_message = "The configuration is invalid."


class ModelOutputError(EsraError):
    """A model answer did not satisfy its output contract; the caller falls back."""

    code = ErrorCode.ESRA_INTERNAL


class UnvalidatedQueryError(EsraError):
    """Something other than a validator-issued ``ValidatedQuery`` reached a provider."""

    code = ErrorCode.ESRA_INTERNAL


class ProviderError(EsraError):
    """A provider failure, classified into one of the sixteen provider error codes.

    Adapters raise it with ``raise ProviderError(code) from driver_exc`` so the driver's text
    stays on the exception chain (for logs) and out of the message.
    """

    def __init__(self, code: ProviderErrorCode) -> None:
        self.code = code
        super().__init__(f"Provider error: {code.value}")
