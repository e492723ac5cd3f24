"""``esra serve --config``: TOML settings are validated with errors naming the key, and a
valid file composes a host that serves its tenants' tools with the configured model client."""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest

from esra.core.config import dump_snapshot
from esra.llm import (
    AnthropicMessagesModel,
    EmbeddingCache,
    LocalModel,
    OpenAIChatModel,
    RemoteModelClient,
)
from esra.llm import _minilm as minilm
from esra.starlette._demo.build import build_demo_databases
from esra.starlette._demo.config import demo_snapshot
from esra.starlette._devtoken import DEV_ISSUER
from esra.starlette._host import build_app
from esra.starlette._parts import open_configured
from esra.starlette._settings import ModelSettings, SettingsError, load_settings
from tests.starlette._tokens import AUDIENCE, ISSUER, idp
from tests.starlette._world import mcp_client

ISSUER_TABLE = f"""
[[issuers]]
issuer = "{ISSUER}"
audience = "{AUDIENCE}"
jwks_file = "jwks.json"
algorithms = ["RS256", "EdDSA"]
tenant_claim = "esra_tenant"
client_claims = ["azp", "client_id"]
leeway_s = 30
tenants = ["larkspur"]
"""
TENANT_TABLE = """
[[tenants]]
id = "larkspur"
config = "larkspur.json"
databases = "data"
"""


@pytest.fixture
def deployment(tmp_path: Path) -> Path:
    """A directory holding the JWKS, the demo tenant's configuration and its databases."""
    (tmp_path / "jwks.json").write_text(json.dumps(idp().jwks()))
    (tmp_path / "larkspur.json").write_text(json.dumps(dump_snapshot(demo_snapshot())))
    (tmp_path / "data").mkdir()
    build_demo_databases(tmp_path / "data", demo_snapshot())
    return tmp_path


def _write(directory: Path, text: str) -> Path:
    path = directory / "esra.toml"
    path.write_text(text)
    return path


def _error(directory: Path, text: str) -> str:
    with pytest.raises(SettingsError) as refused:
        load_settings(_write(directory, text))
    return str(refused.value)


def test_a_complete_file_is_read(deployment: Path) -> None:
    """Every key is read into the settings; relative paths resolve beside the file."""
    keys = {"current": "k2", "keys": {"k1": _key(1), "k2": _key(2)}}
    (deployment / "refkeys.json").write_text(json.dumps(keys))
    text = f"""
[server]
resource_url = "https://esra.example.test/mcp"
allowed_hosts = ["esra.example.test"]
allowed_origins = ["https://portal.example.test"]
resource_name = "Larkspur search"

[fetch]
hourly_chars = 5000
document_ref_ttl_s = 120
keys_file = "refkeys.json"

[model]
kind = "local"
{ISSUER_TABLE}{TENANT_TABLE}"""
    settings = load_settings(_write(deployment, text))
    assert settings.server.resource_url == "https://esra.example.test/mcp"
    assert settings.server.allowed_hosts == ("esra.example.test",)
    assert settings.server.hourly_fetch_chars == 5000
    assert settings.server.document_ref_ttl_s == 120
    assert settings.keyring is not None
    assert settings.keyring.current_key_id == "k2"
    (issuer,) = settings.issuers
    assert issuer.issuer == ISSUER
    assert issuer.audiences == (AUDIENCE,)
    assert issuer.algorithms == frozenset({"RS256", "EdDSA"})
    assert issuer.leeway_s == 30
    assert issuer.tenants == frozenset({"larkspur"})
    (tenant,) = settings.tenants
    assert tenant.id == "larkspur"
    assert tenant.databases == deployment / "data"


def test_source_health_bounds_are_read_and_checked(deployment: Path) -> None:
    text = "[server]\nsource_health_timeout_s = 0.5\nsource_health_ttl_s = 45\n"
    server = load_settings(_write(deployment, text + ISSUER_TABLE + TENANT_TABLE)).server
    assert (server.health_probe_timeout_s, server.health_ttl_s) == (0.5, 45)
    too_slow = "[server]\nsource_health_timeout_s = 600\n" + ISSUER_TABLE + TENANT_TABLE
    assert _error(deployment, too_slow).startswith("server.source_health_timeout_s: must be")


def _key(seed: int) -> str:
    return base64.urlsafe_b64encode(bytes([seed]) * 32).decode().rstrip("=")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[server]\nresouce_url = 'x'\n", "server.resouce_url: unknown key"),
        ("colour = 'blue'\n", "colour: unknown key"),
        ("[server]\nresource_url = 'esra.example.test/mcp'\n", "server.resource_url: must be"),
        ("[fetch]\nhourly_chars = 0\n", "fetch.hourly_chars: must be between"),
        ("[fetch]\nkeys_file = 'missing.json'\n", "fetch.keys_file: no such file"),
        ("[model]\nkind = 'gpt'\n", "model.kind: must be one of anthropic, azure-openai, local"),
        ("issuers = 'x'\n", "issuers: must be an array of tables"),
    ],
)
def test_top_level_problems_name_their_key(deployment: Path, text: str, expected: str) -> None:
    """Each problem's message starts with the key it concerns."""
    issuers = "" if "issuers" in text else ISSUER_TABLE
    assert _error(deployment, text + issuers + TENANT_TABLE).startswith(expected)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (('algorithms = ["RS256", "EdDSA"]', 'algorithms = ["HS256"]'), "issuers[0].algorithms"),
        (('algorithms = ["RS256", "EdDSA"]', 'algorithms = ["none"]'), "issuers[0].algorithms"),
        (("leeway_s = 30", "leeway_s = 3600"), "issuers[0].leeway_s: must be between"),
        (("leeway_s = 30", 'leeway_s = "30"'), "issuers[0].leeway_s: must be a number"),
        ((f'audience = "{AUDIENCE}"', ""), "issuers[0].audience: is required"),
        (('jwks_file = "jwks.json"', ""), "issuers[0].jwks: give exactly one"),
        (('jwks_file = "jwks.json"', 'jwks_file = "nope.json"'), "issuers[0].jwks_file: no such"),
        (('jwks_file = "jwks.json"', 'jwks_file = "larkspur.json"'), "issuers[0].jwks_file: "),
        ((f'issuer = "{ISSUER}"', f'issuer = "{DEV_ISSUER}"'), "issuers[0].issuer: the develop"),
        (('tenants = ["larkspur"]', 'tenants = "larkspur"'), "issuers[0].tenants: must be a list"),
        (("leeway_s = 30", "leeway_s = 30\nscopes = []"), "issuers[0].scopes: unknown key"),
        (("leeway_s = 30", 'leeway_s = 30\nadvertised = "no"'), "issuers[0].advertised: must be"),
    ],
)
def test_issuer_problems_name_their_key(
    deployment: Path, change: tuple[str, str], expected: str
) -> None:
    """A bad issuer setting is refused at start-up, naming issuers[i].<key>."""
    table = ISSUER_TABLE.replace(*change)
    assert _error(deployment, table + TENANT_TABLE).startswith(expected)


def test_an_issuer_is_advertised_unless_the_settings_say_otherwise(deployment: Path) -> None:
    """``advertised = false`` keeps an issuer out of the protected-resource metadata."""
    assert load_settings(_write(deployment, ISSUER_TABLE + TENANT_TABLE)).issuers[0].advertised
    hidden = ISSUER_TABLE.replace("leeway_s = 30", "leeway_s = 30\nadvertised = false")
    (issuer,) = load_settings(_write(deployment, hidden + TENANT_TABLE)).issuers
    assert not issuer.advertised


def test_issuers_and_tenants_are_required(deployment: Path) -> None:
    """A file without issuers or without tenants serves nobody: refused."""
    assert _error(deployment, TENANT_TABLE).startswith("issuers: at least one [[issuers]]")
    assert _error(deployment, ISSUER_TABLE).startswith("tenants: at least one [[tenants]]")


def test_inline_jwks_is_accepted_and_the_same_issuer_twice_is_not(deployment: Path) -> None:
    """``jwks`` may be given inline; one issuer configured twice is refused."""
    inline = ISSUER_TABLE.replace('jwks_file = "jwks.json"', f"jwks = {_toml(idp().jwks())}")
    assert load_settings(_write(deployment, inline + TENANT_TABLE)).issuers[0].keys
    twice = ISSUER_TABLE + ISSUER_TABLE + TENANT_TABLE
    assert _error(deployment, twice).startswith("issuers: the same issuer is configured twice")


def _toml(value: Any) -> str:
    """Render a JSON value as a TOML inline value (JSON strings are TOML strings)."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value)


def _with_source_kind(deployment: Path, kind: str) -> None:
    snapshot = demo_snapshot()
    sources = tuple(
        attrs.evolve(s, provider_kind=kind) if s.id == "hr" else s for s in snapshot.sources
    )
    changed = attrs.evolve(snapshot, sources=sources)
    (deployment / "larkspur.json").write_text(json.dumps(dump_snapshot(changed)))


def test_tenant_problems_name_their_key(deployment: Path) -> None:
    """Mismatched tenant ids, unsupported engines and missing databases are named."""
    other_id = TENANT_TABLE.replace('id = "larkspur"', 'id = "acme"')
    assert _error(deployment, ISSUER_TABLE + other_id).startswith(
        "tenants[0].config: the document configures tenant 'larkspur'"
    )
    missing_dir = TENANT_TABLE.replace('databases = "data"', 'databases = "nowhere"')
    assert _error(deployment, ISSUER_TABLE + missing_dir).startswith(
        "tenants[0].databases: no such directory"
    )
    (deployment / "data" / "hr.db").unlink()
    assert _error(deployment, ISSUER_TABLE + TENANT_TABLE).startswith(
        "tenants[0].databases: source 'hr': no SQLite database 'hr.db'"
    )
    # A kind no installed distribution registers is refused, naming the installed kinds.
    _with_source_kind(deployment, "cassandra")
    message = _error(deployment, ISSUER_TABLE + TENANT_TABLE)
    assert message.startswith("tenants[0].config: source 'hr' has provider kind 'cassandra'")
    assert "installed kinds: " in message
    assert "postgres" in message
    assert "sqlite" in message
    (deployment / "larkspur.json").write_text('{"tenant_id": "larkspur"}')
    assert _error(deployment, ISSUER_TABLE + TENANT_TABLE).startswith("tenants[0].config: ")


OPENAI = '[model]\nkind = "openai"\nbase_url = "http://127.0.0.1:11434/v1"\nmodel = "llama3.1:8b"\n'
AZURE = (
    '[model]\nkind = "azure-openai"\nendpoint = "https://res.openai.azure.com"\n'
    'deployment = "esra-gpt"\napi_version = "2024-10-21"\napi_key_env = "AZURE_KEY"\n'
)
ANTHROPIC = '[model]\nkind = "anthropic"\nmodel = "claude-sonnet-4-5"\napi_key_env = "ANT_KEY"\n'
KEYS = {"AZURE_KEY": "azure-secret-value", "ANT_KEY": "anthropic-secret-value"}


def _model_settings(directory: Path, model: str, environ: dict[str, str]) -> ModelSettings:
    path = _write(directory, model + ISSUER_TABLE + TENANT_TABLE)
    return load_settings(path, environ=environ).model


def test_model_kinds_are_read(deployment: Path) -> None:
    """Each kind's keys are read, with defaults for the optional ones; no key is stored."""
    local = _model_settings(deployment, OPENAI, {})
    assert (local.kind, local.base_url, local.model) == (
        "openai",
        "http://127.0.0.1:11434/v1",
        "llama3.1:8b",
    )
    assert (local.api_key_env, local.timeout_s, local.max_retries) == (None, 10.0, 2)
    tuned = OPENAI + 'api_key_env = "AZURE_KEY"\ntimeout_s = 30\nmax_retries = 0\n'
    openai = _model_settings(deployment, tuned, KEYS)
    assert (openai.api_key_env, openai.timeout_s, openai.max_retries) == ("AZURE_KEY", 30.0, 0)
    azure = _model_settings(deployment, AZURE, KEYS)
    assert (azure.endpoint, azure.deployment, azure.api_version) == (
        "https://res.openai.azure.com",
        "esra-gpt",
        "2024-10-21",
    )
    anthropic = _model_settings(deployment, ANTHROPIC + "max_tokens = 2000\n", KEYS)
    assert (anthropic.model, anthropic.base_url, anthropic.max_tokens) == (
        "claude-sonnet-4-5",
        "https://api.anthropic.com",
        2000,
    )
    assert "secret-value" not in repr((openai, azure, anthropic))
    assert _model_settings(deployment, "", {}) == ModelSettings(kind="local")


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        (OPENAI.replace('base_url = "http://127.0.0.1:11434/v1"\n', ""), "model.base_url: is req"),
        (OPENAI.replace("http://127", "ftp://127"), "model.base_url: must be an absolute http(s)"),
        (OPENAI.replace("http://127", "http://u:p@127"), "model.base_url: must not carry cred"),
        (OPENAI.replace("/v1", "/v1?key=1"), "model.base_url: must not carry credentials"),
        (OPENAI.replace('model = "llama3.1:8b"\n', ""), "model.model: is required for kind 'ope"),
        (OPENAI + "timeout_s = 0\n", "model.timeout_s: must be between 0.1 and 600"),
        (OPENAI + "max_retries = 1.5\n", "model.max_retries: must be an integer"),
        (OPENAI + "max_retries = 11\n", "model.max_retries: must be between 0 and 10"),
        (OPENAI + "temperature = 0.2\n", "model.temperature: unknown key"),
        (OPENAI + 'deployment = "x"\n', "model.deployment: is not a setting of kind 'openai'"),
        (OPENAI + "max_tokens = 10\n", "model.max_tokens: is not a setting of kind 'openai'"),
        (AZURE.replace('deployment = "esra-gpt"\n', ""), "model.deployment: is required for"),
        (AZURE.replace('api_version = "2024-10-21"\n', ""), "model.api_version: is required"),
        (AZURE.replace("https://res", "res"), "model.endpoint: must be an absolute http(s) URL"),
        (AZURE.replace('api_key_env = "AZURE_KEY"\n', ""), "model.api_key_env: is required for"),
        (ANTHROPIC + "max_tokens = 0\n", "model.max_tokens: must be between 1 and"),
        (ANTHROPIC.replace('model = "claude-sonnet-4-5"\n', ""), "model.model: is required"),
        ('[model]\nkind = "local"\nmodel = "x"\n', "model.model: is not a setting of kind 'local'"),
    ],
)
def test_model_problems_name_their_key(deployment: Path, model: str, expected: str) -> None:
    """Every [model] problem is refused at start-up, naming model.<key>."""
    with pytest.raises(SettingsError) as refused:
        _model_settings(deployment, model, KEYS)
    assert str(refused.value).startswith(expected)


@pytest.mark.parametrize(
    "line",
    ['api_key = "sk-live-quokka-0123"\n', 'api_key_env = "sk-live-quokka-0123"\n'],
)
def test_a_key_in_the_settings_is_refused_without_repeating_it(deployment: Path, line: str) -> None:
    """A key pasted into the file is refused, and the message never quotes it."""
    with pytest.raises(SettingsError) as refused:
        _model_settings(deployment, ANTHROPIC.replace('api_key_env = "ANT_KEY"\n', line), KEYS)
    message = str(refused.value)
    assert message.startswith(
        ("model.api_key: keys never go", "model.api_key_env: must be the NAME")
    )
    assert "quokka" not in message


def test_a_missing_key_variable_fails_at_start_up_naming_it(deployment: Path) -> None:
    """An unset or empty variable is named (its value never); commands without a model skip it."""
    for environ in ({}, {"ANT_KEY": ""}):
        with pytest.raises(SettingsError) as refused:
            _model_settings(deployment, ANTHROPIC, environ)
        assert str(refused.value) == (
            "model.api_key_env: the environment variable ANT_KEY is not set"
        )
    path = _write(deployment, ANTHROPIC + ISSUER_TABLE + TENANT_TABLE)
    assert load_settings(path, environ={}, model_key=False).model.api_key_env == "ANT_KEY"


@pytest.mark.parametrize(
    ("model", "client"),
    [
        ("", LocalModel),
        (OPENAI, OpenAIChatModel),
        (AZURE, OpenAIChatModel),
        (ANTHROPIC, AnthropicMessagesModel),
    ],
)
async def test_the_host_builds_the_configured_client(
    deployment: Path, monkeypatch: pytest.MonkeyPatch, model: str, client: type
) -> None:
    """open_configured composes the client the [model] table names, its key from the env."""
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)
    settings = load_settings(_write(deployment, model + ISSUER_TABLE + TENANT_TABLE))
    async with open_configured(settings) as parts:
        assert isinstance(parts.model, client)
        built = parts.model
    if isinstance(built, RemoteModelClient):
        # The host closes the client it built, and with it the connection pool.
        assert built._poster._client.is_closed


async def test_a_key_variable_gone_by_start_up_is_named(
    deployment: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key is read again when the host opens; a variable unset since is a SettingsError."""
    monkeypatch.setenv("ANT_KEY", "anthropic-secret-value")
    settings = load_settings(_write(deployment, ANTHROPIC + ISSUER_TABLE + TENANT_TABLE))
    monkeypatch.delenv("ANT_KEY")
    with pytest.raises(SettingsError, match="environment variable ANT_KEY is not set"):
        async with open_configured(settings):
            pass


def test_unreadable_toml_is_refused(tmp_path: Path) -> None:
    """Invalid TOML and a missing file are SettingsErrors, not tracebacks."""
    with pytest.raises(SettingsError, match="not valid TOML"):
        load_settings(_write(tmp_path, "[server\n"))
    with pytest.raises(SettingsError, match="cannot read"):
        load_settings(tmp_path / "absent.toml")


def test_a_json_file_nested_past_the_decoders_limit_is_refused(deployment: Path) -> None:
    """A JWKS or tenant configuration of ``[[[…`` is a SettingsError, not a RecursionError."""
    (deployment / "jwks.json").write_text("[" * 100_000)
    message = _error(deployment, ISSUER_TABLE + TENANT_TABLE)
    assert "jwks_file" in message
    assert "cannot read" in message


@pytest.mark.integration
async def test_a_configured_host_serves_its_tenant(deployment: Path) -> None:
    """From TOML to tools: the configured issuer's token lists and calls esra_larkspur."""
    settings = load_settings(_write(deployment, ISSUER_TABLE + TENANT_TABLE))
    token = idp().token(
        "ed-1",
        esra_tenant="larkspur",
        azp="demo-client",
        region="emea",
        iat=None,
        nbf=None,
        exp=2**40,
    )
    async with open_configured(settings) as parts:
        app = build_app(parts, host="127.0.0.1", port=8000)
        async with app.router.lifespan_context(app), mcp_client(app, token) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            result = await client.call_tool("esra_larkspur", {"prompt": "paid time off"})
    assert names == ["esra_larkspur"]
    assert result.structured_content is not None
    titles = [r["title"] for r in result.structured_content["results"]]
    assert "Annual leave and paid time off" in titles


def test_the_local_model_takes_an_embeddings_switch(deployment: Path) -> None:
    """``embeddings`` is a boolean of kind local only."""
    local = '[model]\nkind = "local"\n'
    assert _model_settings(deployment, local + "embeddings = true\n", KEYS).embeddings is True
    assert _model_settings(deployment, local, KEYS).embeddings is False
    with pytest.raises(SettingsError, match=r"^model\.embeddings: must be true or false"):
        _model_settings(deployment, local + 'embeddings = "yes"\n', KEYS)
    with pytest.raises(SettingsError, match=r"^model\.embeddings: is not a setting of kind"):
        _model_settings(deployment, ANTHROPIC + "embeddings = true\n", KEYS)


def test_the_local_model_takes_an_embeddings_cache_file(deployment: Path) -> None:
    """``embeddings_cache`` is a file beside the TOML (its folder must exist), bounded by
    ``embeddings_cache_entries``; both need ``embeddings = true``."""
    local = '[model]\nkind = "local"\nembeddings = true\n'
    settings = _model_settings(deployment, local + 'embeddings_cache = "vectors.sqlite"\n', KEYS)
    assert settings.embeddings_cache == (deployment / "vectors.sqlite").resolve()
    assert settings.embeddings_cache_entries == 100_000
    assert _model_settings(deployment, local, KEYS).embeddings_cache is None
    bounded = local + 'embeddings_cache = "v.sqlite"\nembeddings_cache_entries = 500\n'
    assert _model_settings(deployment, bounded, KEYS).embeddings_cache_entries == 500
    refusals = {
        '[model]\nkind = "local"\nembeddings_cache = "v.sqlite"\n': (
            r"^model\.embeddings_cache: needs embeddings = true"
        ),
        '[model]\nkind = "local"\nembeddings_cache_entries = 5\n': (
            r"^model\.embeddings_cache_entries: needs embeddings = true"
        ),
        local + 'embeddings_cache = "missing/v.sqlite"\n': (
            r"^model\.embeddings_cache: no such directory"
        ),
        local + 'embeddings_cache = "data"\n': r"^model\.embeddings_cache: is a directory",
        local + "embeddings_cache = 3\n": r"^model\.embeddings_cache: must be a non-empty string",
        local + "embeddings_cache_entries = 0\n": (
            r"^model\.embeddings_cache_entries: must be between 1 and"
        ),
        ANTHROPIC + 'embeddings_cache = "v.sqlite"\n': (
            r"^model\.embeddings_cache: is not a setting of kind"
        ),
    }
    for text, refusal in refusals.items():
        with pytest.raises(SettingsError, match=refusal):
            _model_settings(deployment, text, KEYS)


def test_the_documented_local_model_example_is_valid(deployment: Path) -> None:
    """The ``[model]`` example for the local model in docs/host.md reads as documented."""
    host_md = Path(__file__).parents[2] / "docs" / "host.md"
    start = host_md.read_text(encoding="utf-8").index("[model]                       # the offline")
    example = host_md.read_text(encoding="utf-8")[start:].split("\n\n", 1)[0] + "\n"
    settings = _model_settings(deployment, example, KEYS)
    assert (settings.kind, settings.embeddings) == ("local", True)
    assert settings.embeddings_cache == (deployment / "esra-vectors.sqlite").resolve()


class _FakeMiniLM:
    """Stands in for the packaged model: the host's wiring is under test, not MiniLM."""

    identity = "fake-minilm"

    def __init__(self, *, cache_size: int = 4096) -> None:
        self.cache_size = cache_size

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        return [[1.0] for _ in texts]


async def test_the_host_keeps_vectors_in_the_configured_file_and_closes_it(
    deployment: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``embeddings_cache`` gives the host's LocalModel an EmbeddingCache on that file, with
    the configured bound, closed when the host stops."""
    monkeypatch.setattr(minilm, "MiniLMEmbedder", _FakeMiniLM)
    local = '[model]\nkind = "local"\nembeddings = true\nembeddings_cache = "v.sqlite"\n'
    text = local + "embeddings_cache_entries = 20\n" + ISSUER_TABLE + TENANT_TABLE
    settings = load_settings(_write(deployment, text))
    async with open_configured(settings) as parts:
        model = parts.model
        assert isinstance(model, LocalModel)
        cache = model.embedder
        assert isinstance(cache, EmbeddingCache)
        assert (cache.path, cache.max_entries) == ((deployment / "v.sqlite").resolve(), 20)
        assert cache.encode(["a"]) == [[1.0]]
    with pytest.raises(RuntimeError, match="closed"):
        cache.encode(["a"])


async def test_an_unopenable_cache_file_stops_the_host_naming_the_key(
    deployment: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache path holding something other than a cache fails at start-up, naming the key."""
    monkeypatch.setattr(minilm, "MiniLMEmbedder", _FakeMiniLM)
    (deployment / "notes.txt").write_text("not a database, only words " * 50)
    local = '[model]\nkind = "local"\nembeddings = true\nembeddings_cache = "notes.txt"\n'
    settings = load_settings(_write(deployment, local + ISSUER_TABLE + TENANT_TABLE))
    with pytest.raises(SettingsError, match=r"^model\.embeddings_cache: cannot open"):
        async with open_configured(settings):
            pass


async def test_embeddings_without_the_extra_stop_the_host_naming_it(
    deployment: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Asking for embeddings where the extra is missing fails at start-up, not mid-search."""
    monkeypatch.setitem(sys.modules, "esra.llm._minilm", None)  # as if not installed
    settings = load_settings(
        _write(
            deployment, '[model]\nkind = "local"\nembeddings = true\n' + ISSUER_TABLE + TENANT_TABLE
        )
    )
    with pytest.raises(SettingsError, match=r"^model\.embeddings: "):
        async with open_configured(settings):
            pass
