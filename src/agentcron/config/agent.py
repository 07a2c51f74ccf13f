"""The built-in agent's settings, and where its models run and what they cost (the provider)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from agentcron.config.env import ConfigError, number, or_environ
from agentcron.errors import InvalidInputError

__all__ = [
    "DEFAULT_MAX_STEPS",
    "THINKING_LEVELS",
    "AgentSettings",
    "ProviderSettings",
    "RunnerSettings",
    "agent_settings_from_env",
    "check_model_name",
    "load_price_table",
    "provider_from_env",
    "runner_settings_from_env",
]

MODEL_ENV = "AGENTCRON_MODEL"
BASE_URL_ENV = "AGENTCRON_BASE_URL"
API_KEY_ENV = "AGENTCRON_API_KEY"
PRICES_ENV = "AGENTCRON_PRICES"
WPS_ENV = "AGENTCRON_OFFLINE_WPS"
TOOLS_FILE_ENV = "AGENTCRON_TOOLS_FILE"
RUNNER_URL_ENV = "AGENTCRON_RUNNER_URL"
RUNNER_SECRET_ENV = "AGENTCRON_RUNNER_SECRET"
RUNNER_TIMEOUT_ENV = "AGENTCRON_RUNNER_TIMEOUT"
RUNNER_RETRIES_ENV = "AGENTCRON_RUNNER_RETRIES"
RUNNER_CONCURRENCY_ENV = "AGENTCRON_RUNNER_CONCURRENCY"


_MAX_MODEL_NAME = 200


def check_model_name(name: str | None) -> str | None:
    """A model name as given to a job ("provider:name", e.g. "openai:gpt-4o", or "offline"):
    stripped, blank = None (the runner's default); refused when too long or with spaces.
    """
    if name is None or not name.strip():
        return None
    name = name.strip()
    if len(name) > _MAX_MODEL_NAME or any(c.isspace() or not c.isprintable() for c in name):
        raise InvalidInputError(
            f"a model name is 1 to {_MAX_MODEL_NAME} printable characters without spaces, "
            f"e.g. openai:gpt-4o or offline; got {name[:40]!r}"
        )
    return name


DEFAULT_MAX_STEPS = 25  # model requests per turn (seed 004)
THINKING_LEVELS = ("off", "on", "minimal", "low", "medium", "high", "xhigh", "max")
SYSTEM_PROMPT_ENV = "AGENTCRON_SYSTEM_PROMPT"
TEMPERATURE_ENV = "AGENTCRON_TEMPERATURE"
MAX_TOKENS_ENV = "AGENTCRON_MAX_TOKENS"
THINKING_ENV = "AGENTCRON_THINKING"
MAX_STEPS_ENV = "AGENTCRON_MAX_STEPS"


@dataclass(frozen=True, slots=True)
class AgentSettings:
    """The built-in agent's settings (seed 004: agent config). None = the model's own default;
    `model` None = `$AGENTCRON_MODEL`, else the offline model. A job's `model` overrides it.
    """

    model: str | None = None
    system_prompt: str | None = None  # None = the built-in prompt
    temperature: float | None = None  # 0 to 2
    max_tokens: int | None = None  # of one model response
    thinking: str | None = None  # one of THINKING_LEVELS, where the provider supports it
    max_steps: int = DEFAULT_MAX_STEPS  # model requests per turn; reaching it still succeeds

    def __post_init__(self) -> None:
        if self.temperature is not None and not 0 <= self.temperature <= 2:
            raise ConfigError(f"temperature must be from 0 to 2, got {self.temperature}")
        if self.max_tokens is not None and not 1 <= self.max_tokens <= 1_000_000:
            raise ConfigError(f"max_tokens must be from 1 to 1000000, got {self.max_tokens}")
        if self.thinking is not None and self.thinking not in THINKING_LEVELS:
            raise ConfigError(
                f"thinking must be one of {', '.join(THINKING_LEVELS)}, got {self.thinking!r}"
            )
        if not 1 <= self.max_steps <= 1000:
            raise ConfigError(f"max_steps must be from 1 to 1000, got {self.max_steps}")
        check_model_name(self.model)


def agent_settings_from_env(env: Mapping[str, str] | None = None) -> AgentSettings:
    """The agent settings the environment sets (`AGENTCRON_MODEL`, `AGENTCRON_SYSTEM_PROMPT`,
    `AGENTCRON_TEMPERATURE`, `AGENTCRON_MAX_TOKENS`, `AGENTCRON_THINKING`, `AGENTCRON_MAX_STEPS`).
    """
    env = or_environ(env)
    steps = number(env, MAX_STEPS_ENV, int)
    try:
        return AgentSettings(
            model=check_model_name(env.get(MODEL_ENV)),
            system_prompt=env.get(SYSTEM_PROMPT_ENV) or None,
            temperature=number(env, TEMPERATURE_ENV, float),
            max_tokens=number(env, MAX_TOKENS_ENV, int),
            thinking=env.get(THINKING_ENV, "").strip().lower() or None,
            max_steps=DEFAULT_MAX_STEPS if steps is None else steps,
        )
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


@dataclass(frozen=True, slots=True)
class ProviderSettings:
    """Where named models run and what they cost, as the settings give them (each checked where
    it is used, as before): an OpenAI-compatible server (`base_url`, Ollama, vLLM; for
    "anthropic:" names Anthropic's Messages API there, and its `api_key`), the price table's
    file (`prices`) and the offline model's words per second
    (`offline_wps`, read by `agent.offline.parse_wps`). None = not set.
    """

    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    prices: str | None = None
    offline_wps: str | None = None


def provider_from_env(env: Mapping[str, str] | None = None) -> ProviderSettings:
    """`AGENTCRON_BASE_URL`, `AGENTCRON_API_KEY`, `AGENTCRON_PRICES`, `AGENTCRON_OFFLINE_WPS`."""
    env = or_environ(env)
    return ProviderSettings(
        base_url=env.get(BASE_URL_ENV, "").strip() or None,
        api_key=env.get(API_KEY_ENV) or None,
        prices=env.get(PRICES_ENV) or None,
        offline_wps=env.get(WPS_ENV),
    )


def load_price_table(
    source: str | Path | Mapping[str, Mapping[str, float]] | None = None,
    env: Mapping[str, str] | None = None,
) -> Mapping[str, Mapping[str, float]]:
    """The per-model price table: a mapping, a JSON file, or the file named by $AGENTCRON_PRICES.

    The file holds `{"provider:model": {"input_per_mtok": 0.4, "output_per_mtok": 1.6}, ...}`
    (USD per million tokens). It overrides the maintained table of `genai-prices`; a model in
    neither is "unpriced" (its cost is None, never 0).
    """
    if isinstance(source, Mapping):
        return source
    path = source if source is not None else or_environ(env).get(PRICES_ENV)
    if not path:
        return {}
    try:
        data = json.loads(Path(path).expanduser().read_text("utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read the price table {str(path)!r}: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"the price table {str(path)!r} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(
            f"the price table {str(path)!r} must be a JSON object of "
            '{"provider:model": {"input_per_mtok": x, "output_per_mtok": y}}'
        )
    return data


@dataclass(frozen=True, slots=True)
class RunnerSettings:
    """Your own agent over HTTP (`[runner]`): its URL (None: the built-in agent runs the
    turns), the `whsec_...` secret the requests are signed with (None: `serve` keeps one in
    the data directory), the seconds one turn's exchange may take (an approval's wait not
    counted), how often a refused connection is tried again, and how many requests may be
    open to the URL at once.
    """

    url: str | None = None
    secret: str | None = field(default=None, repr=False)
    timeout: float = 300.0
    retries: int = 3
    concurrency: int = 16

    def __post_init__(self) -> None:
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ConfigError(f"the runner URL must be http(s)://..., got {self.url[:80]!r}")
        if self.secret is not None and not self.secret.startswith("whsec_"):
            raise ConfigError("the runner secret must be a Standard Webhooks `whsec_...` secret")
        if not 0 < self.timeout <= 86_400:
            raise ConfigError(f"the runner timeout must be from 0 to 86400s, got {self.timeout}")
        if not 0 <= self.retries <= 10:
            raise ConfigError(f"the runner retries must be from 0 to 10, got {self.retries}")
        if not 1 <= self.concurrency <= 1000:
            raise ConfigError(
                f"the runner concurrency must be from 1 to 1000, got {self.concurrency}"
            )


def runner_settings_from_env(
    env: Mapping[str, str] | None = None, *, url: str | None = None
) -> RunnerSettings:
    """`AGENTCRON_RUNNER_URL` (`url`, the flag, wins), `_SECRET`, `_TIMEOUT`, `_RETRIES`,
    `_CONCURRENCY`.
    """
    env = or_environ(env)
    defaults = RunnerSettings()
    timeout = number(env, RUNNER_TIMEOUT_ENV, float)
    retries = number(env, RUNNER_RETRIES_ENV, int)
    concurrency = number(env, RUNNER_CONCURRENCY_ENV, int)
    return RunnerSettings(
        url=(url or env.get(RUNNER_URL_ENV, "")).strip() or None,
        secret=env.get(RUNNER_SECRET_ENV, "").strip() or None,
        timeout=defaults.timeout if timeout is None else timeout,
        retries=defaults.retries if retries is None else retries,
        concurrency=defaults.concurrency if concurrency is None else concurrency,
    )
