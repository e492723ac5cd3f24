"""External secret references (``env:``, ``file:``): per-tenant policy, file checks, routing.

Environment variables and files belong to the process, not to a tenant: without a policy a
tenant's configuration naming ``env:AWS_SECRET_ACCESS_KEY`` or ``file:/etc/shadow`` would
read the host's secrets. These tests reproduce those reads and pin that they fail as
``SECRET_UNRESOLVED``, like every other refusal, with nothing secret logged.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from esra.core.codes import ProviderErrorCode
from esra.core.exceptions import ConfigurationError, ProviderError
from esra.core.secrets import (
    DENY_ALL,
    EncryptedSecretStore,
    ExternalReferenceWriteError,
    KeyEncryptionKeys,
    ReferencePolicy,
    ReferenceSecretResolver,
    RoutingSecretStore,
    reference_scheme,
)
from esra.core.testing._secret_table import InMemorySecretTable

SECRET = "s3cr3t-from-outside-Qw9"
ENVIRON = {
    "ESRA_SECRET_PG": SECRET,
    "ESRA_SECRET_EMPTY": "",
    "AWS_SECRET_ACCESS_KEY": "host-credential",
    "ESRA_SECRET_OTHER_TENANT": "theirs",
}


async def _unresolved(resolver: ReferenceSecretResolver | RoutingSecretStore, *args: str) -> None:
    with pytest.raises(ProviderError) as exc:
        await resolver.resolve(*args)
    assert exc.value.code is ProviderErrorCode.SECRET_UNRESOLVED


def _secret_file(directory: Path, name: str, text: str, mode: int = 0o600) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.fixture
def secrets_dir(tmp_path: Path) -> Path:
    return tmp_path / "run" / "secrets" / "tenant-a"


@pytest.fixture
def resolver(secrets_dir: Path) -> ReferenceSecretResolver:
    return ReferenceSecretResolver(
        {
            "tenant-a": ReferencePolicy(
                env_prefixes=("ESRA_SECRET_PG",), directories=(secrets_dir,)
            ),
            "tenant-b": ReferencePolicy(env_names=("ESRA_SECRET_OTHER_TENANT",)),
        },
        environ=ENVIRON,
    )


class TestEnvReferences:
    async def test_an_allowed_variable_resolves(self, resolver: ReferenceSecretResolver) -> None:
        assert await resolver.resolve("tenant-a", "env:ESRA_SECRET_PG") == SECRET
        assert await resolver.resolve("tenant-b", "env:ESRA_SECRET_OTHER_TENANT") == "theirs"

    @pytest.mark.parametrize(
        ("tenant", "reference"),
        [
            ("tenant-a", "env:AWS_SECRET_ACCESS_KEY"),  # the host's own credential
            ("tenant-a", "env:ESRA_SECRET_OTHER_TENANT"),  # another tenant's variable
            ("tenant-b", "env:ESRA_SECRET_PG"),
            ("tenant-c", "env:ESRA_SECRET_PG"),  # no policy: deny all
            ("tenant-a", "env:ESRA_SECRET_PG_MISSING"),  # allowed prefix, unset
            ("tenant-a", "env:"),
            ("tenant-a", "env:ESRA_SECRET_PG=x"),
            ("tenant-a", "env:../ESRA_SECRET_PG"),
            ("tenant-a", "vault:ESRA_SECRET_PG"),
            ("tenant-a", "ESRA_SECRET_PG"),
        ],
    )
    async def test_anything_else_is_unresolved(
        self, resolver: ReferenceSecretResolver, tenant: str, reference: str
    ) -> None:
        await _unresolved(resolver, tenant, reference)

    async def test_an_empty_variable_is_unresolved(self) -> None:
        resolver = ReferenceSecretResolver(
            default=ReferencePolicy(env_prefixes=("ESRA_SECRET_",)), environ=ENVIRON
        )
        await _unresolved(resolver, "anyone", "env:ESRA_SECRET_EMPTY")
        assert await resolver.resolve("anyone", "env:ESRA_SECRET_PG") == SECRET

    async def test_the_process_environment_is_the_default(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("ESRA_SECRET_FROM_PROCESS", SECRET)
        resolver = ReferenceSecretResolver(
            default=ReferencePolicy(env_names=("ESRA_SECRET_FROM_PROCESS",))
        )
        assert await resolver.resolve("t", "env:ESRA_SECRET_FROM_PROCESS") == SECRET

    async def test_the_default_policy_denies_everything(self) -> None:
        resolver = ReferenceSecretResolver(environ=ENVIRON)
        assert resolver.policy("tenant-a") is DENY_ALL
        await _unresolved(resolver, "tenant-a", "env:ESRA_SECRET_PG")


class TestFileReferences:
    async def test_a_private_file_resolves_with_one_newline_stripped(
        self, resolver: ReferenceSecretResolver, secrets_dir: Path
    ) -> None:
        path = _secret_file(secrets_dir, "pg", SECRET + "\n")
        assert await resolver.resolve("tenant-a", f"file:{path}") == SECRET
        crlf = _secret_file(secrets_dir, "crlf", SECRET + "\r\n")
        assert await resolver.resolve("tenant-a", f"file:{crlf}") == SECRET
        kept = _secret_file(secrets_dir, "kept", " padded \n\n")
        assert await resolver.resolve("tenant-a", f"file:{kept}") == " padded \n"

    async def test_a_kubernetes_style_link_inside_the_directory_resolves(
        self, resolver: ReferenceSecretResolver, secrets_dir: Path
    ) -> None:
        target = _secret_file(secrets_dir / "..2026_03_01", "pg", SECRET)
        (secrets_dir / "..data").symlink_to(target.parent)
        (secrets_dir / "pg").symlink_to(secrets_dir / "..data" / "pg")
        assert await resolver.resolve("tenant-a", f"file:{secrets_dir / 'pg'}") == SECRET

    async def test_files_outside_the_allowed_directories_are_unresolved(
        self, resolver: ReferenceSecretResolver, secrets_dir: Path, tmp_path: Path
    ) -> None:
        outside = _secret_file(tmp_path / "elsewhere", "pg", SECRET)
        sibling = _secret_file(Path(f"{secrets_dir}-evil"), "pg", SECRET)
        escaping = secrets_dir / "escape"
        secrets_dir.mkdir(parents=True, exist_ok=True)
        escaping.symlink_to(outside)
        inside = _secret_file(secrets_dir, "pg", SECRET)
        for reference in (
            f"file:{outside}",
            f"file:{sibling}",
            f"file:{escaping}",
            f"file:{secrets_dir}/../../secrets/tenant-a/../../elsewhere/pg",
            "file:/etc/passwd",
            "file:relative/pg",
            "file:",
        ):
            await _unresolved(resolver, "tenant-a", reference)
        # Another tenant may not read tenant-a's directory.
        await _unresolved(resolver, "tenant-b", f"file:{inside}")

    @pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o620, 0o602])
    async def test_a_file_open_to_group_or_others_is_unresolved(
        self, resolver: ReferenceSecretResolver, secrets_dir: Path, mode: int
    ) -> None:
        path = _secret_file(secrets_dir, "pg", SECRET, mode)
        await _unresolved(resolver, "tenant-a", f"file:{path}")

    async def test_readable_files_may_be_allowed_but_writable_ones_never(
        self, secrets_dir: Path
    ) -> None:
        resolver = ReferenceSecretResolver(
            default=ReferencePolicy(directories=(secrets_dir,), private_files_only=False)
        )
        readable = _secret_file(secrets_dir, "readable", SECRET, 0o644)
        assert await resolver.resolve("t", f"file:{readable}") == SECRET
        for mode in (0o664, 0o646):
            writable = _secret_file(secrets_dir, f"writable-{mode:o}", SECRET, mode)
            await _unresolved(resolver, "t", f"file:{writable}")

    async def test_directories_large_empty_and_binary_files_are_unresolved(
        self, resolver: ReferenceSecretResolver, secrets_dir: Path
    ) -> None:
        large = _secret_file(secrets_dir, "large", "x" * (64 * 1024 + 1))
        empty = _secret_file(secrets_dir, "empty", "\n")
        binary = secrets_dir / "binary"
        binary.write_bytes(b"\xff\xfe\x00")
        binary.chmod(0o600)
        (secrets_dir / "sub").mkdir(mode=0o700)
        for path in (large, empty, binary, secrets_dir / "sub", secrets_dir / "absent"):
            await _unresolved(resolver, "tenant-a", f"file:{path}")


class TestPolicy:
    @pytest.mark.parametrize(
        "kwargs",
        [
            {"env_prefixes": "ESRA_SECRET_"},  # one string, not a list
            {"env_prefixes": ("ESRA-SECRET",)},
            {"env_names": ("",)},
            {"directories": ("relative/dir",)},
            {"directories": "/run/secrets"},
        ],
    )
    def test_a_malformed_policy_is_a_configuration_error(self, kwargs: dict[str, object]) -> None:
        with pytest.raises(ConfigurationError):
            ReferencePolicy(**kwargs)  # type: ignore[arg-type]

    def test_reference_schemes(self) -> None:
        assert reference_scheme("env:X") == "env"
        assert reference_scheme("file:/x") == "file"
        assert reference_scheme("sales-db") is None
        assert reference_scheme("vault:x") is None
        assert reference_scheme("environment") is None


class TestRouting:
    async def test_schemes_choose_the_store(self, secrets_dir: Path) -> None:
        external = ReferenceSecretResolver(
            default=ReferencePolicy(env_prefixes=("ESRA_SECRET_",)), environ=ENVIRON
        )
        stored = EncryptedSecretStore(InMemorySecretTable(), KeyEncryptionKeys.generate())
        store = RoutingSecretStore(stored, external)
        await store.put("t", "sales-db", "stored-value")
        assert await store.resolve("t", "sales-db") == "stored-value"
        assert await store.resolve("t", "env:ESRA_SECRET_PG") == SECRET
        for reference in ("env:ESRA_SECRET_PG", "file:/run/secrets/x"):
            with pytest.raises(ExternalReferenceWriteError):
                await store.put("t", reference, "overwrite")
        assert await store.resolve("t", "env:ESRA_SECRET_PG") == SECRET
        await _unresolved(store, "t", "missing")
        await _unresolved(store, "u", "sales-db")

    async def test_nothing_secret_is_logged_or_shown(
        self,
        resolver: ReferenceSecretResolver,
        secrets_dir: Path,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        path = _secret_file(secrets_dir, "pg", SECRET)
        loose = _secret_file(secrets_dir, "loose", SECRET, 0o644)
        store = RoutingSecretStore(
            EncryptedSecretStore(InMemorySecretTable(), KeyEncryptionKeys.generate()), resolver
        )
        with caplog.at_level(logging.DEBUG):
            await store.resolve("tenant-a", f"file:{path}")
            await store.resolve("tenant-a", "env:ESRA_SECRET_PG")
            await _unresolved(store, "tenant-a", f"file:{loose}")
            await _unresolved(store, "tenant-b", "env:ESRA_SECRET_PG")
            await _unresolved(store, "tenant-a", "env:AWS_SECRET_ACCESS_KEY")
        assert len(caplog.records) == 3  # every refusal is logged, with its reason
        shown = caplog.text + "".join(repr(r.__dict__) for r in caplog.records)
        shown += repr(store) + repr(resolver) + repr(resolver.policy("tenant-a"))
        assert SECRET not in shown
        assert "host-credential" not in shown
        assert os.fspath(secrets_dir) in repr(resolver.policy("tenant-a"))
