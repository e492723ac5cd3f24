"""Tests for esra.core._pipeline.cache_keys: tenant partitioning, versioning, no prompt text."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from esra.core._pipeline.cache_keys import (
    candidate_fingerprint,
    normalize_prompt,
    prompt_fingerprint,
    selection_cache_key,
    tenant_partition,
)

BASE: dict[str, Any] = {
    "tenant_id": "tenant-a",
    "exposure_id": "exp-1",
    "config_version": "v1",
    "candidate_ids": ("s-1", "s-2"),
    "configuration": "c" * 64,
    "request": "Parental leave policy",
}


def _key(**changes: Any) -> str:
    return selection_cache_key(**{**BASE, **changes})


def test_normalize_prompt_casefolds_and_collapses_whitespace() -> None:
    """Normalization casefolds (ß → ss) and turns any whitespace run into one trimmed space."""
    assert normalize_prompt("  Straße\t\n POLICY  now ") == "strasse policy now"


def test_key_has_versioned_tenant_partition_prefix() -> None:
    """A selection key starts with ``esra:v1:{sha256(tenant)[:16]}:selection:``."""
    partition = hashlib.sha256(b"tenant-a").hexdigest()[:16]
    assert tenant_partition("tenant-a") == f"esra:v1:{partition}"
    assert _key().startswith(f"esra:v1:{partition}:selection:")


def test_key_never_contains_the_prompt_or_ids() -> None:
    """The key holds digests only: no prompt words, exposure id or source ids."""
    key = _key(request="quarterly revenue forecast", exposure_id="exposure-xyz")
    for fragment in ("quarterly", "revenue", "exposure-xyz", "s-1", "tenant-a"):
        assert fragment not in key


@pytest.mark.parametrize(
    "change",
    [
        {"tenant_id": "tenant-b"},
        {"exposure_id": "exp-2"},
        {"config_version": "v2"},
        {"candidate_ids": ("s-1",)},
        {"candidate_ids": ("s-1", "s-2", "s-3")},
        {"configuration": "d" * 64},
        {"request": "Sick leave policy"},
    ],
)
def test_key_changes_with_each_component(change: dict[str, Any]) -> None:
    """Changing the tenant, exposure, config version, candidate set, configuration content or
    prompt changes the key."""
    assert _key(**change) != _key()


def test_tenants_never_share_a_partition() -> None:
    """Two tenants' keys for otherwise identical inputs differ already in the partition."""
    key_a, key_b = _key(tenant_id="tenant-a"), _key(tenant_id="tenant-b")
    assert key_a.split(":selection:")[0] != key_b.split(":selection:")[0]


def test_key_ignores_candidate_order_and_prompt_case_and_spacing() -> None:
    """Candidate order and prompt case or spacing address the same entry."""
    assert _key(candidate_ids=("s-2", "s-1", "s-1")) == _key()
    assert _key(request="  parental   LEAVE\npolicy ") == _key()


def test_fingerprints_are_sha256_hex() -> None:
    """Fingerprints are 64-character hex SHA-256 digests of the normalized values."""
    assert prompt_fingerprint("A  b") == hashlib.sha256(b"a b").hexdigest()
    assert len(candidate_fingerprint(["x"])) == 64


@given(st.text())
def test_normalization_is_idempotent(text: str) -> None:
    """Normalizing twice equals normalizing once, so equal keys stay equal on re-hashing."""
    once = normalize_prompt(text)
    assert normalize_prompt(once) == once


@given(st.lists(st.text(min_size=1), min_size=1))
def test_prompt_fingerprint_ignores_whitespace_shape(words: list[str]) -> None:
    """Any whitespace between the same words gives the same fingerprint."""
    assert prompt_fingerprint(" ".join(words)) == prompt_fingerprint("\n\t ".join(words) + "  ")
