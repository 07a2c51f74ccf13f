"""`[jobs]`: the policy hook asked before the agent creates, updates or reschedules a job."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from agentcron.config.env import or_environ, seconds

__all__ = [
    "MAX_HOOK_RESPONSE_BYTES",
    "POLICY_HOOK_ENV",
    "POLICY_HOOK_SECRET_ENV",
    "POLICY_HOOK_TIMEOUT_ENV",
    "JobsSettings",
    "jobs_settings_from_env",
]

POLICY_HOOK_ENV = "AGENTCRON_POLICY_HOOK"
POLICY_HOOK_SECRET_ENV = "AGENTCRON_POLICY_HOOK_SECRET"
POLICY_HOOK_TIMEOUT_ENV = "AGENTCRON_POLICY_HOOK_TIMEOUT"
DEFAULT_HOOK_TIMEOUT = 5.0
MAX_HOOK_TIMEOUT = 60.0
MAX_HOOK_RESPONSE_BYTES = 64 * 1024  # an HTTP hook's answer; more is refused (fail closed)


@dataclass(frozen=True, slots=True)
class JobsSettings:
    """The policy hook: "package.module:function" or an http(s) URL (None: none), the secret
    an HTTP hook's requests are signed with, and how long a hook may take (seconds).
    """

    policy_hook: str | None = None
    policy_hook_secret: str | None = None
    timeout: float = DEFAULT_HOOK_TIMEOUT


def jobs_settings_from_env(env: Mapping[str, str] | None = None) -> JobsSettings:
    """The `[jobs]` settings the environment (and so the file) sets (ConfigError: a bad one)."""
    env = or_environ(env)
    hook = env.get(POLICY_HOOK_ENV, "").strip() or None
    secret = env.get(POLICY_HOOK_SECRET_ENV, "").strip() or None
    timeout = seconds(
        env, POLICY_HOOK_TIMEOUT_ENV, timedelta(seconds=DEFAULT_HOOK_TIMEOUT), 0.1, MAX_HOOK_TIMEOUT
    )
    return JobsSettings(hook, secret, timeout.total_seconds())
