"""``[redis]``: read with errors naming the key, and composed into the host it configures.

A configured host shares its cache, fetch quota and breaker openings through Redis (each
switchable); without ``[redis]`` it keeps them in its own memory. Composition connects
nothing, so a host whose Redis is down still starts.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from esra.core.config import dump_snapshot
from esra.core.exceptions import ConfigurationError, QuotaUnavailableError
from esra.starlette._demo.build import build_demo_databases
from esra.starlette._demo.config import demo_snapshot
from esra.starlette._parts import open_configured
from esra.starlette._settings import SettingsError, load_settings
from esra.starlette._shared_state import RedisSettings
from tests._redis import free_port
from tests.starlette._tokens import AUDIENCE, ISSUER, idp

BASE = f"""
[[issuers]]
issuer = "{ISSUER}"
audience = "{AUDIENCE}"
jwks_file = "jwks.json"
algorithms = ["RS256"]

[[tenants]]
id = "larkspur"
config = "larkspur.json"
databases = "data"
"""


@pytest.fixture
def deployment(tmp_path: Path) -> Path:
    (tmp_path / "jwks.json").write_text(json.dumps(idp().jwks()))
    (tmp_path / "larkspur.json").write_text(json.dumps(dump_snapshot(demo_snapshot())))
    (tmp_path / "data").mkdir()
    build_demo_databases(tmp_path / "data", demo_snapshot())
    return tmp_path


def _load(directory: Path, redis: str) -> RedisSettings | None:
    path = directory / "esra.toml"
    path.write_text(BASE + redis)
    return load_settings(path, model_key=False).redis


def test_no_redis_table_shares_nothing(deployment: Path) -> None:
    assert _load(deployment, "") is None


def test_the_table_is_read_with_its_defaults(deployment: Path) -> None:
    read = _load(deployment, '[redis]\nurl = "redis://127.0.0.1:6379/2"\n')
    assert read == RedisSettings(url="redis://127.0.0.1:6379/2")
    assert (read.cache, read.quota, read.breakers, read.key_prefix) == (True, True, True, "esra:")
    switched = _load(
        deployment,
        '[redis]\nurl_env = "ESRA_REDIS_URL"\ncache = false\nbreakers = false\n'
        'key_prefix = "acme:"\nmax_connections = 8\n',
    )
    assert switched == RedisSettings(
        url_env="ESRA_REDIS_URL", cache=False, breakers=False, key_prefix="acme:", max_connections=8
    )


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ("cache = true", "redis.url: give exactly one of url and url_env"),
        ('url = "redis://a"\nurl_env = "X"', "redis.url: give exactly one of url and url_env"),
        ('url = "http://redis:6379"', "redis.url: must start with redis://"),
        ('url_env = "not a name"', "redis.url_env: must be an environment variable name"),
        ('url = "redis://a"\nquota = "yes"', "redis.quota: must be true or false"),
        ('url = "redis://a"\nkey_prefix = "a b"', "redis.key_prefix: 1 to 64"),
        ('url = "redis://a"\nmax_connections = 1', "redis.max_connections: must be between"),
        ('url = "redis://a"\nmax_connections = 4.5', "redis.max_connections: must be a whole"),
        ('url = "redis://a"\nport = 6379', "redis.port"),
    ],
)
def test_problems_name_their_key(deployment: Path, table: str, expected: str) -> None:
    with pytest.raises(SettingsError) as refused:
        _load(deployment, f"[redis]\n{table}\n")
    assert expected in str(refused.value)


@pytest.mark.parametrize(
    "url",
    [
        "redis://:hunter2-secret@127.0.0.1:6379/0",
        "rediss://esra:hunter2-secret@cache.internal:6380/0",
        "redis://127.0.0.1:6379/0?password=hunter2-secret",
    ],
)
def test_a_literal_password_in_the_url_is_refused_without_repeating_it(
    deployment: Path, url: str
) -> None:
    """As for the state database's URL: a secret does not belong in the settings file, which
    is read, copied and versioned as configuration. ``url_env`` holds such a URL."""
    with pytest.raises(SettingsError) as refused:
        _load(deployment, f'[redis]\nurl = "{url}"\n')
    message = str(refused.value)
    assert message.startswith("redis.url: holds a literal password")
    assert "url_env" in message
    assert "hunter2-secret" not in message


def test_a_user_name_alone_is_not_a_password(deployment: Path) -> None:
    read = _load(deployment, '[redis]\nurl = "redis://esra@127.0.0.1:6379/0"\n')
    assert read == RedisSettings(url="redis://esra@127.0.0.1:6379/0")


async def test_the_host_shares_what_the_table_names_and_starts_with_redis_down(
    deployment: Path,
) -> None:
    """Composition connects nothing: a Redis nobody listens on still composes a host."""
    down = f"redis://127.0.0.1:{free_port()}/0"
    path = deployment / "esra.toml"
    path.write_text(BASE + f'[redis]\nurl = "{down}"\nbreakers = false\n')
    async with open_configured(load_settings(path, model_key=False)) as parts:
        assert type(parts.cache).__name__ == "RedisCache"
        assert type(parts.quota).__name__ == "RedisQuotaStore"
        # Down: the cache answers a miss at once (fails open), the quota refuses (closed).
        assert parts.cache is not None
        assert await parts.cache.get("k") is None
        assert parts.quota is not None
        with pytest.raises(QuotaUnavailableError):
            await parts.quota.consume("larkspur", "alice", 10, 100)
    path.write_text(BASE)
    async with open_configured(load_settings(path, model_key=False)) as parts:
        assert parts.cache is None
        assert parts.quota is None


async def test_an_unset_url_variable_fails_at_start_naming_it(
    deployment: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ESRA_TEST_UNSET_REDIS", raising=False)
    path = deployment / "esra.toml"
    path.write_text(BASE + '[redis]\nurl_env = "ESRA_TEST_UNSET_REDIS"\n')
    with pytest.raises(ConfigurationError, match="ESRA_TEST_UNSET_REDIS is not set"):
        async with open_configured(load_settings(path, model_key=False)):
            pass


def test_the_documented_example_reads_as_documented(deployment: Path) -> None:
    """docs/host.md's ``[redis]`` example is accepted and means what its comments say."""
    text = (Path(__file__).parents[2] / "docs" / "host.md").read_text(encoding="utf-8")
    section = text[text.index("### Several hosts: `[redis]`") :]
    (example,) = re.findall(r"```toml\n(.*?)```", section.split("\n### ", 1)[0], flags=re.DOTALL)
    assert _load(deployment, example) == RedisSettings(url_env="ESRA_REDIS_URL")
