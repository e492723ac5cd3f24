"""ReferenceSecretResolver: secrets held outside ESRA, named by ``env:NAME`` or ``file:/path``.

Configuration names the secret (``${secret:env:ESRA_SECRET_PG}``,
``${secret:file:/run/secrets/pg-password}``); the value is read when a connection opens and
never stored. Environment variables and files belong to the whole process, not to one
tenant, so each tenant gets an explicit :class:`ReferencePolicy` saying which variables and
directories it may name. The default policy allows nothing.

Rules:

- ``env:NAME`` — ``NAME`` is a plain variable name, equal to one of the policy's
  ``env_names`` or starting with one of its ``env_prefixes``; the variable must be set and
  non-empty;
- ``file:/path`` — an absolute path whose real location (symlinks resolved, so Kubernetes'
  ``..data`` links work and an escaping link does not) is inside one of the policy's
  ``directories``; a regular file of at most 64 KiB of UTF-8 text, one trailing newline
  stripped. By default (``private_files_only``) the file must not be readable or writable by
  group or others (``chmod 600``/``400``) — set it False for orchestrators that mount secret
  files ``0644``; a group- or world-*writable* file is refused either way, since anyone could
  replace the secret.

Every refusal is ``ProviderError(SECRET_UNRESOLVED)``, whatever the reason, so a caller
learns nothing about the host's variables or files; the reason goes to the log (without the
value).
"""

from __future__ import annotations

import logging
import os
import re
import stat
from collections.abc import Collection, Mapping
from pathlib import Path

import attrs

from esra.core.codes import ProviderErrorCode
from esra.core.exceptions import ConfigurationError, ProviderError

__all__ = [
    "DENY_ALL",
    "ENV_SCHEME",
    "FILE_SCHEME",
    "MAX_FILE_SECRET_BYTES",
    "ReferencePolicy",
    "ReferenceSecretResolver",
    "reference_scheme",
]

ENV_SCHEME = "env"
FILE_SCHEME = "file"
MAX_FILE_SECRET_BYTES = 64 * 1024
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")

_log = logging.getLogger(__name__)


def reference_scheme(reference: str) -> str | None:
    """``"env"`` or ``"file"`` for an external reference, else ``None`` (a stored secret)."""
    scheme, sep, _ = reference.partition(":")
    return scheme if sep and scheme in (ENV_SCHEME, FILE_SCHEME) else None


def _prefixes(values: Collection[str]) -> tuple[str, ...]:
    if isinstance(values, str):
        msg = "a list of names is expected, not one string"
        raise ConfigurationError(msg)
    checked = tuple(values)
    for value in checked:
        if not isinstance(value, str) or not _ENV_NAME.fullmatch(value):
            msg = "an allowed environment variable name or prefix is a plain variable name"
            raise ConfigurationError(msg)
    return checked


def _directories(values: Collection[str | os.PathLike[str]]) -> tuple[Path, ...]:
    if isinstance(values, str):
        msg = "a list of directories is expected, not one string"
        raise ConfigurationError(msg)
    checked = []
    for value in values:
        path = Path(value)
        if not path.is_absolute():
            msg = "an allowed secret directory must be an absolute path"
            raise ConfigurationError(msg)
        checked.append(path)
    return tuple(checked)


@attrs.frozen
class ReferencePolicy:
    """What one tenant may name: environment variables and directories of secret files.

    Raises:
        ConfigurationError: for a malformed name, prefix or a relative directory.
    """

    env_names: tuple[str, ...] = attrs.field(default=(), converter=_prefixes)
    env_prefixes: tuple[str, ...] = attrs.field(default=(), converter=_prefixes)
    directories: tuple[Path, ...] = attrs.field(default=(), converter=_directories)
    private_files_only: bool = True

    def allows_env(self, name: str) -> bool:
        """Whether this policy lets the tenant read the variable ``name``."""
        return name in self.env_names or any(name.startswith(p) for p in self.env_prefixes)

    def allows_path(self, real_path: Path) -> bool:
        """Whether ``real_path`` (already resolved) lies inside an allowed directory."""
        return any(real_path.is_relative_to(Path(os.path.realpath(d))) for d in self.directories)


DENY_ALL = ReferencePolicy()


class _UnresolvedError(Exception):
    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class ReferenceSecretResolver:
    """A ``SecretStore`` for ``env:`` and ``file:`` references, tenant by tenant.

    Args:
        policies: the policy of each tenant id.
        default: the policy of every other tenant (``DENY_ALL`` unless given).
        environ: the environment to read (``os.environ`` unless given; tests pass a dict).
    """

    def __init__(
        self,
        policies: Mapping[str, ReferencePolicy] | None = None,
        *,
        default: ReferencePolicy = DENY_ALL,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self._policies = dict(policies or {})
        self._default = default
        self._environ = environ

    def policy(self, tenant_id: str) -> ReferencePolicy:
        """The policy ``tenant_id`` resolves under."""
        return self._policies.get(tenant_id, self._default)

    async def resolve(self, tenant_id: str, reference: str) -> str:
        """Return the referenced secret, or raise ``ProviderError(SECRET_UNRESOLVED)``."""
        try:
            if not isinstance(tenant_id, str) or not isinstance(reference, str):
                raise _UnresolvedError("not a reference")
            scheme, _, target = reference.partition(":")
            policy = self.policy(tenant_id)
            if scheme == ENV_SCHEME:
                return self._env(policy, target)
            if scheme == FILE_SCHEME:
                return self._file(policy, target)
            raise _UnresolvedError("not an env: or file: reference")
        except _UnresolvedError as exc:
            _log.warning(
                "secret reference not resolved: %s",
                exc.reason,
                extra={"tenant_id": tenant_id, "reference": reference},
            )
            raise ProviderError(ProviderErrorCode.SECRET_UNRESOLVED) from None

    def _env(self, policy: ReferencePolicy, name: str) -> str:
        if not _ENV_NAME.fullmatch(name):
            raise _UnresolvedError("not a variable name")
        if not policy.allows_env(name):
            raise _UnresolvedError("variable not allowed for this tenant")
        environ = os.environ if self._environ is None else self._environ
        value = environ.get(name, "")
        if not value:
            raise _UnresolvedError("variable unset or empty")
        return value

    def _file(self, policy: ReferencePolicy, target: str) -> str:
        path = Path(target)
        if not target or "\x00" in target or not path.is_absolute():
            raise _UnresolvedError("not an absolute path")
        real = Path(os.path.realpath(path))
        if not policy.allows_path(real):
            raise _UnresolvedError("path not inside a directory allowed for this tenant")
        try:
            fd = os.open(real, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            raise _UnresolvedError("file cannot be opened") from None
        try:
            # Checked on the open descriptor: what is read is what was checked.
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise _UnresolvedError("not a regular file")
            if info.st_mode & 0o022:
                raise _UnresolvedError("file writable by group or others")
            if policy.private_files_only and info.st_mode & 0o044:
                raise _UnresolvedError("file readable by group or others")
            with os.fdopen(fd, "rb", closefd=False) as handle:
                data = handle.read(MAX_FILE_SECRET_BYTES + 1)
        finally:
            os.close(fd)
        if len(data) > MAX_FILE_SECRET_BYTES:
            raise _UnresolvedError("file larger than 64 KiB")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise _UnresolvedError("file is not UTF-8 text") from None
        text = text.removesuffix("\n").removesuffix("\r")
        if not text:
            raise _UnresolvedError("file is empty")
        return text

    def __repr__(self) -> str:
        return f"ReferenceSecretResolver(tenants={sorted(self._policies)!r})"
