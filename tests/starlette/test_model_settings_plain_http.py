"""``[model]``: plain http only to this machine unless ``allow_insecure_http = true``.

The host's settings used to accept ``base_url = "http://api.example.com/v1"``, and the host
then sent the model's key and the tenants' prompts (enterprise record text) in cleartext. The
rule is the model clients' own (``esra.llm.is_loopback_url``), checked when the settings are
read so a bad deployment fails at start-up, naming the key and never the URL's path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from esra.llm import AnthropicMessagesModel, OpenAIChatModel
from esra.starlette._host import open_model
from esra.starlette._settings import ModelSettings, SettingsError, _model, _Table

_KEYS = {"OPENAI_KEY": "openai-secret-value", "AZURE_KEY": "azure-secret-value"}


def _read(table: dict[str, Any], tmp_path: Path) -> ModelSettings:
    return _model(_Table({"model": table}, "").table("model"), _KEYS, tmp_path)


def _openai(base_url: str, **more: Any) -> dict[str, Any]:
    return {"kind": "openai", "base_url": base_url, "model": "gpt", **more}


def _azure(endpoint: str, **more: Any) -> dict[str, Any]:
    return {
        "kind": "azure-openai",
        "endpoint": endpoint,
        "deployment": "dep",
        "api_version": "2024-10-21",
        "api_key_env": "AZURE_KEY",
        **more,
    }


def _anthropic(base_url: str, **more: Any) -> dict[str, Any]:
    return {
        "kind": "anthropic",
        "model": "claude",
        "api_key_env": "OPENAI_KEY",
        "base_url": base_url,
        **more,
    }


_REMOTE = "http://models.example.com/tenant-7f3a/v1"


@pytest.mark.parametrize(
    ("table", "key"),
    [
        (_openai(_REMOTE), "base_url"),
        (_openai("HTTP://127.0.0.1.evil.com/v1"), "base_url"),
        (_openai("http://[::ffff:127.0.0.1]/v1"), "base_url"),
        (_openai("http://2130706433/v1"), "base_url"),
        (_azure(_REMOTE), "endpoint"),
        (_anthropic(_REMOTE), "base_url"),
    ],
)
def test_plain_http_to_another_host_is_a_settings_error(
    table: dict[str, Any], key: str, tmp_path: Path
) -> None:
    with pytest.raises(SettingsError) as refused:
        _read(table, tmp_path)
    message = str(refused.value)
    assert message.startswith(f"model.{key}: must use https")
    assert "allow_insecure_http" in message
    assert "tenant-7f3a" not in message
    assert "evil" not in message


@pytest.mark.parametrize(
    "table",
    [
        _openai(_REMOTE, allow_insecure_http=True),
        _azure(_REMOTE, allow_insecure_http=True),
        _anthropic(_REMOTE, allow_insecure_http=True),
    ],
)
async def test_the_opt_in_allows_plain_http_and_reaches_the_client(
    table: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host builds the client with the opt-in: without it passed on, the client's own
    check would refuse the URL the settings accepted, at start-up."""
    for name, value in _KEYS.items():
        monkeypatch.setenv(name, value)
    settings = _read(table, tmp_path)
    assert settings.allow_insecure_http is True
    model = open_model(settings)
    assert isinstance(model, OpenAIChatModel | AnthropicMessagesModel)
    await model.aclose()


@pytest.mark.parametrize(
    "table",
    [
        _openai("http://127.0.0.1:11434/v1"),
        _openai("http://localhost:8000/v1"),
        _openai("http://[::1]:8080/v1"),
        _openai("https://api.openai.com/v1"),
        _azure("https://res.openai.azure.com"),
        _anthropic("https://api.anthropic.com"),
    ],
)
def test_loopback_and_https_need_no_opt_in(table: dict[str, Any], tmp_path: Path) -> None:
    assert _read(table, tmp_path).allow_insecure_http is False


@pytest.mark.parametrize("value", ["yes", 1, "true"])
def test_the_opt_in_must_be_a_boolean(value: object, tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=r"^model\.allow_insecure_http: must be true or false"):
        _read(_openai(_REMOTE, allow_insecure_http=value), tmp_path)


def test_the_opt_in_is_not_a_setting_of_the_local_model(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=r"^model\.allow_insecure_http: is not a setting"):
        _read({"kind": "local", "allow_insecure_http": True}, tmp_path)
