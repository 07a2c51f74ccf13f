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
SERVICE_ENV = "AGENTCRON_WAKE_SERVICE"
VERIFIER_ENV = "AGENTCRON_WAKE_VERIFIER"

PROVIDERS = ("local", "managed")
# The wake service's contract (`relay`: `agentcron relay`; `seed002`: a seed-002 managed-cron
# service), and the fire token's form (default: the service's).
SERVICES = ("relay", "seed002")


@dataclass(frozen=True, slots=True)
class WakeSettings:
    """Which provider wakes the engine and, for `managed`, how to reach the wake service."""

    provider: str = "local"
    service: str = "relay"  # the arm client: relay or seed002
    verifier: str | None = None  # the fire token's form: relay or seed002 (default: service)
    relay_url: str | None = None  # the wake service's base URL (seed002: the portal's)
    relay_token: str | None = None  # this agent's credential for it (seed002: its bearer token)
    callback_url: str | None = None  # this agent's base URL; fires go to {it}/api/cron/fire
    audience: str | None = None  # the fire token's `aud`
    issuer: str | None = None  # the fire token's `iss` (default: relay_url)
    jwks_url: str | None = None  # relay: default {relay_url}/jwks.json; seed002: needed

    def __post_init__(self) -> None:
        if self.provider not in PROVIDERS:
            raise ConfigError(f"the wake provider is local or managed, got {self.provider!r}")
        if self.service not in SERVICES:
            raise ConfigError(f"the wake service is relay or seed002, got {self.service!r}")
        if self.verifier is not None and self.verifier not in SERVICES:
            raise ConfigError(f"the wake verifier is relay or seed002, got {self.verifier!r}")

    @property
    def token_form(self) -> str:
        """The fire token's form: the verifier's setting, else the service's."""
        return self.verifier or self.service

    @property
    def expected_issuer(self) -> str | None:
        return self.issuer or self.relay_url

    @property
    def jwks(self) -> str | None:
        if self.jwks_url or self.token_form != "relay":
            return self.jwks_url  # a seed-002 portal's JWKS has no known place: it is set
        return f"{self.relay_url.rstrip('/')}/jwks.json" if self.relay_url else None

    def missing(self, *, arms: bool = False, verifier: bool = False) -> list[str]:
        """The settings `managed` needs that are not set (empty = usable as configured);
        `arms` / `verifier`: the caller brings its own arm client / fire verifier.
        """
        needed: dict[str, str | None] = {}
        if not arms:
            needed |= {"wake.relay_url": self.relay_url, "wake.relay_token": self.relay_token}
        needed["wake.callback_url"] = self.callback_url
        if not verifier:
            needed["wake.audience"] = self.audience
            # the relay's issuer and JWKS default to the relay URL (missing: said once, above)
            derived = self.token_form == "relay" and not self.relay_url and not arms
            if not derived:
                needed |= {"wake.issuer": self.expected_issuer, "wake.jwks_url": self.jwks}
        return [key for key, value in needed.items() if not value]


def wake_settings_from_env(
    env: Mapping[str, str] | None = None, *, provider: str | None = None
) -> WakeSettings:
    """The wake settings the environment (and so the file) sets; `provider` is the flag."""
    env = or_environ(env)

    def get(name: str) -> str | None:
        return env.get(name, "").strip() or None

    chosen = (provider or get(WAKE_ENV) or "local").strip().lower()
    verifier = get(VERIFIER_ENV)
    return WakeSettings(
        provider=chosen,
        service=(get(SERVICE_ENV) or "relay").lower(),
        verifier=verifier.lower() if verifier else None,
        relay_url=get(RELAY_URL_ENV),
        relay_token=get(RELAY_TOKEN_ENV),
        callback_url=get(CALLBACK_URL_ENV),
        audience=get(AUDIENCE_ENV),
        issuer=get(ISSUER_ENV),
        jwks_url=get(JWKS_URL_ENV),
    )
