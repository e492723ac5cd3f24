"""Cache keys built by the core: tenant-partitioned, versioned, and free of prompt text.

A key never contains the caller's prompt, only a SHA-256 digest of its normalized form, so a
cache backend (or whoever can list its keys) learns nothing about what was asked. Every key
starts with a per-tenant partition, so one tenant's entries can never be addressed by another.

A configuration's version string is not unique: the settings file names its own and the admin
workspace numbers publications 1, 2, 3…, so two different configurations can share one. Result
and selection keys therefore also carry ``configuration_fingerprint`` — a digest of the content
the cached value was computed from — and never rely on the version alone.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping

from esra.core._config.converter import CONVERTER
from esra.core._context import ClaimValue

__all__ = [
    "KEY_VERSION",
    "SELECTION_TTL_S",
    "authorization_fingerprint",
    "candidate_fingerprint",
    "configuration_fingerprint",
    "content_generation_key",
    "normalize_prompt",
    "prompt_fingerprint",
    "result_cache_key",
    "selection_cache_key",
    "tenant_partition",
]

KEY_VERSION = "v1"
SELECTION_TTL_S = 300.0

_WHITESPACE = re.compile(r"\s+")


def _sha256(text: str) -> str:
    # "surrogatepass": a caller's prompt may hold a lone surrogate, which strict UTF-8 cannot
    # encode (the whole invocation failed on its key); valid text encodes as before, and
    # distinct texts still give distinct bytes.
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def normalize_prompt(text: str) -> str:
    """Casefold ``text`` and collapse every run of whitespace into one space, trimmed."""
    return _WHITESPACE.sub(" ", text.casefold()).strip()


def prompt_fingerprint(text: str) -> str:
    """Return the hex SHA-256 of the normalized prompt.

    Prompts that differ only in case or whitespace share a fingerprint.
    """
    return _sha256(normalize_prompt(text))


def candidate_fingerprint(source_ids: Iterable[str]) -> str:
    """Return the hex SHA-256 of the candidate set, independent of order and repetition."""
    return _sha256(json.dumps(sorted(set(source_ids))))


def configuration_fingerprint(configuration: object) -> str:
    """Return the hex SHA-256 of ``configuration``'s content (configuration objects, any shape).

    Dumped by the configuration converter (sets sorted) as canonical JSON, so equal content
    gives one fingerprint whichever object holds it — a snapshot reloaded by another host or
    after a restart still hits — and any change of content gives another. A value the
    converter cannot dump is written by its ``repr``: at worst a miss, never a false hit.
    """
    document = json.dumps(
        CONVERTER.unstructure(configuration),
        sort_keys=True,
        separators=(",", ":"),
        default=repr,
    )
    return _sha256(document)


def tenant_partition(tenant_id: str) -> str:
    """Return the key prefix that partitions the cache by tenant."""
    return f"esra:{KEY_VERSION}:{_sha256(tenant_id)[:16]}"


def content_generation_key(tenant_id: str) -> str:
    """Return the key of the tenant's content generation (``content_generation``)."""
    return f"{tenant_partition(tenant_id)}:generation"


def selection_cache_key(
    *,
    tenant_id: str,
    exposure_id: str,
    config_version: str,
    candidate_ids: Iterable[str],
    configuration: str,
    request: str,
) -> str:
    """Return the cache key of a source selection.

    The digest covers the tenant (again, in full, so the 16-character partition is never the
    only thing separating tenants), the exposure, the configuration version, the candidate
    set, ``configuration`` — the ``configuration_fingerprint`` of what the selection prompt is
    built from (the version string alone may be reused by different content) — and the
    normalized prompt; a change in any of them addresses a different entry.
    """
    material = json.dumps(
        [
            tenant_id,
            exposure_id,
            config_version,
            candidate_fingerprint(candidate_ids),
            configuration,
            prompt_fingerprint(request),
        ]
    )
    return f"{tenant_partition(tenant_id)}:selection:{_sha256(material)}"


def _claim_material(value: ClaimValue) -> object:
    # Typed so that "1" and 1, or "true" and True, never share a fingerprint.
    if isinstance(value, tuple):
        return ["tuple", sorted(str(v) for v in value)]
    if isinstance(value, int) and not isinstance(value, bool):
        # In hexadecimal, which has no length limit: ``str`` refuses an integer of more than
        # 4,300 digits (``ValueError``), and the whole invocation failed on its cache key
        # before validation could drop the source the claim cannot bind for.
        return ["int", format(value, "x")]
    return [type(value).__name__, str(value)]


def authorization_fingerprint(
    *,
    client_app_id: str,
    claims: Mapping[str, ClaimValue],
    authorized_source_ids: Iterable[str] | None,
    effective_source_ids: Iterable[str],
) -> str:
    """Return the hex SHA-256 of everything that decides what a caller may see.

    Every claim counts, not only those a record filter names today: a filter added later
    must not find entries cached under an authorization that ignored it. The subject does
    not count — two callers with the same authorization see the same results — which is
    why cached results never carry caller-bound document references.
    """
    material = json.dumps(
        [
            client_app_id,
            sorted((name, _claim_material(value)) for name, value in claims.items()),
            None if authorized_source_ids is None else sorted(set(authorized_source_ids)),
            sorted(set(effective_source_ids)),
        ]
    )
    return _sha256(material)


def result_cache_key(
    *,
    tenant_id: str,
    client_app_id: str,
    capability_id: str,
    exposure_id: str,
    config_version: str,
    configuration: str,
    authorization: str,
    request: str,
    generation: str,
    filters: str = "",
    top_k: int | None = None,
) -> str:
    """Return the cache key of a whole retrieval response.

    Covers the tenant, client application, capability, exposure, configuration version, the
    ``configuration_fingerprint`` of the configuration the response is computed from (the
    version string alone may be reused by different content), the caller's
    ``authorization_fingerprint``, the normalized prompt, the caller's filters
    (``caller_filters.filters_digest``), the top-K the response was cut to and the tenant's
    content generation (``content_generation``), so a change in configuration, in the
    caller's authorization, in what was asked for or in which documents may be retrieved
    addresses a different entry.
    """
    material = json.dumps(
        [
            tenant_id,
            client_app_id,
            capability_id,
            exposure_id,
            config_version,
            configuration,
            authorization,
            prompt_fingerprint(request),
            filters,
            top_k,
            generation,
        ]
    )
    return f"{tenant_partition(tenant_id)}:result:{_sha256(material)}"
