"""The `[wake]` settings (flag > environment > file > default, like every setting)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from agentcron.config.env import ConfigError, or_environ

WAKE_ENV = "AGENTCRON_WAKE"
RELAY_URL_ENV = "AGENTCRON_WAKE_RELAY_URL"
RELAY_TOKEN_ENV = "AGENTCRON_WAKE_RELAY_TOKEN"
CALLBACK_URL_ENV = "AGENTCRON_WAKE_CALLBACK_URL"
AUDIENCE_ENV = "AGENTCRON_WAKE_AUDIENCE"
ISSUER_ENV = "AGENTCRON_WAKE_ISSUER"
JWKS_URL_ENV = "AGENTCRON_WAKE_JWKS_URL"

PROVIDERS = ("local", "managed")


@dataclass(frozen=True, slots=True)
class WakeSettings:
    """Which provider wakes the engine and, for `managed`, how to reach the relay."""

    provider: str = "local"
    relay_url: str | None = None
    relay_token: str | None = None
    callback_url: str | None = None  # this agent's base URL; fires go to {it}/api/cron/fire
    audience: str | None = None  # the fire token's `aud`
    issuer: str | None = None  # the fire token's `iss` (default: relay_url)
    jwks_url: str | None = None  # default: {relay_url}/jwks.json

    def __post_init__(self) -> None:
        if self.provider not in PROVIDERS:
            raise ConfigError(f"the wake provider is local or managed, got {self.provider!r}")

    @property
    def expected_issuer(self) -> str | None:
        return self.issuer or self.relay_url

    @property
    def jwks(self) -> str | None:
        if self.jwks_url:
            return self.jwks_url
        return f"{self.relay_url.rstrip('/')}/jwks.json" if self.relay_url else None

    def missing(self) -> list[str]:
        """The settings `managed` needs that are not set (empty = usable as configured)."""
        needed = {
            "wake.relay_url": self.relay_url,
            "wake.relay_token": self.relay_token,
            "wake.callback_url": self.callback_url,
            "wake.audience": self.audience,
        }
        return [key for key, value in needed.items() if not value]


def wake_settings_from_env(
    env: Mapping[str, str] | None = None, *, provider: str | None = None
) -> WakeSettings:
    """The wake settings the environment (and so the file) sets; `provider` is the flag."""
    env = or_environ(env)

    def get(name: str) -> str | None:
        return env.get(name, "").strip() or None

    chosen = (provider or get(WAKE_ENV) or "local").strip().lower()
    return WakeSettings(
        provider=chosen,
        relay_url=get(RELAY_URL_ENV),
        relay_token=get(RELAY_TOKEN_ENV),
        callback_url=get(CALLBACK_URL_ENV),
        audience=get(AUDIENCE_ENV),
        issuer=get(ISSUER_ENV),
        jwks_url=get(JWKS_URL_ENV),
    )
