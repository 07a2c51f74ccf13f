"""The `[wake]` settings: the service and verifier choices, and what `managed` needs of each."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentcron.config import Settings
from agentcron.config.env import ConfigError
from agentcron.config.wake import WakeSettings, wake_settings_from_env

SEED002 = {
    "AGENTCRON_WAKE": "managed",
    "AGENTCRON_WAKE_SERVICE": "seed002",
    "AGENTCRON_WAKE_RELAY_URL": "https://portal.example",
    "AGENTCRON_WAKE_RELAY_TOKEN": "nous-token",
    "AGENTCRON_WAKE_CALLBACK_URL": "https://agent.example",
    "AGENTCRON_WAKE_AUDIENCE": "agent:inst-1",
    "AGENTCRON_WAKE_JWKS_URL": "https://portal.example/.well-known/jwks.json",
}


def test_seed002_from_the_environment() -> None:
    wake = wake_settings_from_env(SEED002)
    assert (wake.provider, wake.service, wake.token_form) == ("managed", "seed002", "seed002")
    assert wake.expected_issuer == "https://portal.example"  # seed 002: iss is the portal
    assert wake.jwks == SEED002["AGENTCRON_WAKE_JWKS_URL"]
    assert wake.missing() == []


def test_seed002_needs_its_jwks_url_the_relay_has_a_default() -> None:
    env = {k: v for k, v in SEED002.items() if k != "AGENTCRON_WAKE_JWKS_URL"}
    assert wake_settings_from_env(env).missing() == ["wake.jwks_url"]
    relay = wake_settings_from_env({**env, "AGENTCRON_WAKE_SERVICE": "relay"})
    assert relay.jwks == "https://portal.example/jwks.json"
    assert relay.missing() == []
    # the relay's client with seed 002's tokens: the JWKS must be named
    mixed = wake_settings_from_env({**env, "AGENTCRON_WAKE_SERVICE": "relay",
                                    "AGENTCRON_WAKE_VERIFIER": "SEED002"})  # fmt: skip
    assert (mixed.service, mixed.token_form) == ("relay", "seed002")
    assert mixed.missing() == ["wake.jwks_url"]


def test_an_own_client_or_verifier_needs_fewer_settings() -> None:
    bare = WakeSettings(provider="managed", callback_url="https://agent.example")
    assert bare.missing() == ["wake.relay_url", "wake.relay_token", "wake.audience"]
    assert bare.missing(arms=True) == ["wake.audience", "wake.issuer", "wake.jwks_url"]
    assert bare.missing(arms=True, verifier=True) == []
    assert WakeSettings(provider="managed").missing(arms=True, verifier=True) == [
        "wake.callback_url"
    ]


@pytest.mark.parametrize("field", ["service", "verifier"])
def test_an_unknown_service_or_verifier_is_a_config_error(field: str) -> None:
    with pytest.raises(ConfigError, match="relay or seed002"):
        WakeSettings(**{field: "qstash"})  # type: ignore[arg-type]


def test_the_file_sets_them_too(tmp_path: Path) -> None:
    file = tmp_path / "agentcron.toml"
    file.write_text('[wake]\nprovider = "managed"\nservice = "seed002"\nverifier = "relay"\n')
    wake = Settings.load(file, env={}).wake()
    assert (wake.provider, wake.service, wake.verifier) == ("managed", "seed002", "relay")
