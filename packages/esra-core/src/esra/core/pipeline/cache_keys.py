"""Cache keys built by the core: tenant-partitioned, versioned, and free of prompt text.

A key never contains the caller's prompt, only a SHA-256 digest of its normalized form, so a
cache backend (or whoever can list its keys) learns nothing about what was asked. Every key
starts with a per-tenant partition, so one tenant's entries can never be addressed by another.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable

__all__ = [
    "KEY_VERSION",
    "SELECTION_TTL_S",
    "candidate_fingerprint",
    "normalize_prompt",
    "prompt_fingerprint",
    "selection_cache_key",
    "tenant_partition",
]

KEY_VERSION = "v1"
SELECTION_TTL_S = 300.0

_WHITESPACE = re.compile(r"\s+")


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


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


def tenant_partition(tenant_id: str) -> str:
    """Return the key prefix that partitions the cache by tenant."""
    return f"esra:{KEY_VERSION}:{_sha256(tenant_id)[:16]}"


def selection_cache_key(
    *,
    tenant_id: str,
    exposure_id: str,
    config_version: str,
    candidate_ids: Iterable[str],
    request: str,
) -> str:
    """Return the cache key of a source selection.

    The digest covers the tenant (again, in full, so the 16-character partition is never the
    only thing separating tenants), the exposure, the configuration version, the candidate
    set and the normalized prompt; a change in any of them addresses a different entry.
    """
    material = json.dumps(
        [
            tenant_id,
            exposure_id,
            config_version,
            candidate_fingerprint(candidate_ids),
            prompt_fingerprint(request),
        ]
    )
    return f"{tenant_partition(tenant_id)}:selection:{_sha256(material)}"
