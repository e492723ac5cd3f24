"""A host's settings directory for tests that run ``esra`` against ``--config``.

Writes what every such host needs beside its settings file — an owner-only keyring, the
tenant's empty file configuration and the test issuer's JWKS — and the file itself: the test
issuer, one tenant, then the sections ``durable`` gives (``[state]``, ``[secrets]``,
``[audit]``…), as written.
"""

from __future__ import annotations

import base64
import json
import secrets
from pathlib import Path

from esra.core.config import ConfigSnapshot, dump_snapshot
from tests.starlette._tokens import AUDIENCE, ISSUER, idp

__all__ = ["write_host_settings"]


def write_host_settings(directory: Path, *, tenant: str, durable: str) -> Path:
    """Write ``directory/esra.toml`` (and what it names) for ``tenant``; return its path.

    ``durable`` names the keyring as ``kek.json`` when it holds a ``[secrets]`` section.
    """
    keyring = directory / "kek.json"
    material = base64.b64encode(secrets.token_bytes(32)).decode()
    keyring.write_text(json.dumps({"active": "k1", "keys": {"k1": material}}))
    keyring.chmod(0o600)
    empty = ConfigSnapshot(tenant_id=tenant, version="file-1")
    (directory / "tenant.json").write_text(json.dumps(dump_snapshot(empty)))
    (directory / "jwks.json").write_text(json.dumps(idp().jwks()))
    path = directory / "esra.toml"
    path.write_text(
        f"""
[[issuers]]
issuer = "{ISSUER}"
audience = "{AUDIENCE}"
jwks_file = "jwks.json"
algorithms = ["RS256"]

[[tenants]]
id = "{tenant}"
config = "tenant.json"

{durable}"""
    )
    return path
