"""The policy hook: asked before the agent creates, updates or reschedules a job through the
cron tool, beside the normal limits. It allows, changes (a proposal the normal rules check
again) or refuses (the reason goes back to the model).

Two kinds, from `[jobs] policy_hook`: a Python function ("package.module:function", sync or
async, called with a `PolicyRequest`), or an http(s) URL that is POSTed the request as JSON,
signed the Standard Webhooks way with `[jobs] policy_hook_secret`, and answers
`{"decision": "allow"}`, `{"decision": "change", "proposal": {...}}` or
`{"decision": "refuse", "reason": "..."}`. Both fail closed: a hook that raises, times out,
answers an error or something unreadable refuses, and the model is told why.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime

from agentcron.agent.tool_deps import HookFunction, PolicyHook
from agentcron.config.env import ConfigError
from agentcron.config.jobs import MAX_HOOK_RESPONSE_BYTES, JobsSettings
from agentcron.domain.policy import (
    Allow,
    Change,
    JobProposal,
    PolicyDecision,
    PolicyRequest,
    Refuse,
)
from agentcron.store.ids import new_id

__all__ = ["HttpPolicyHook", "PolicyHook", "PythonPolicyHook", "policy_hook_from_settings"]

log = logging.getLogger(__name__)


def _refused(why: str, request: PolicyRequest) -> Refuse:
    log.warning(
        "policy hook failed: refused",
        extra={"action": request.action.value, "session_key": request.session_key, "why": why},
    )
    return Refuse(f"the policy hook could not be asked ({why}), so this is refused")


def _checked(decision: object, request: PolicyRequest) -> PolicyDecision:
    if isinstance(decision, (Allow, Change, Refuse)):
        if isinstance(decision, Change) and not isinstance(decision.proposal, JobProposal):
            return _refused("it changed the proposal into something else", request)
        return decision
    return _refused(f"it answered {type(decision).__name__}, not Allow, Change or Refuse", request)


class PythonPolicyHook:
    """A function of your own; an async one is bounded by `timeout` seconds."""

    def __init__(self, function: HookFunction, *, timeout: float = 5.0) -> None:
        self.function = function
        self.timeout = timeout

    @classmethod
    def load(cls, target: str, *, timeout: float = 5.0) -> PythonPolicyHook:
        """The function "package.module:function" names (ConfigError when it is none)."""
        module_name, _, attr = target.partition(":")
        if not module_name or not attr:
            raise ConfigError(
                f"policy_hook must be module:function or an http(s) URL, got {target[:80]!r}"
            )
        try:
            found = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"policy_hook {target!r} cannot be loaded: {exc}") from exc
        if not callable(found):
            raise ConfigError(f"policy_hook {target!r} is not a function")
        return cls(found, timeout=timeout)

    async def decide(self, request: PolicyRequest) -> PolicyDecision:
        try:
            answer = self.function(request)
            if inspect.isawaitable(answer):
                async with asyncio.timeout(self.timeout):
                    answer = await answer
        except TimeoutError:
            return _refused(f"no answer within {self.timeout:g}s", request)
        except Exception as exc:  # the operator's code: any failure refuses (fail closed)
            return _refused(f"it raised {type(exc).__name__}: {str(exc)[:200]}", request)
        return _checked(answer, request)


def _decision_of(body: bytes) -> PolicyDecision:
    """An HTTP hook's answer (ValueError / TypeError when it is none)."""
    data = json.loads(body)
    if not isinstance(data, dict):
        raise TypeError("the answer is no JSON object")
    decision = data.get("decision")
    if decision == "allow":
        return Allow()
    if decision == "refuse":
        reason = data.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError("a refusal needs a reason")
        return Refuse(reason.strip()[:1000])
    if decision == "change":
        return Change(JobProposal.of_data(data.get("proposal")))  # type: ignore[arg-type]
    raise ValueError(f"decision {str(decision)[:40]!r} is not allow, change or refuse")


class HttpPolicyHook:
    """An HTTP endpoint of your own, POSTed each request as JSON, signed (Standard Webhooks:
    `webhook-id`, `webhook-timestamp`, `webhook-signature`), within `timeout` seconds and an
    answer of at most `MAX_HOOK_RESPONSE_BYTES`.
    """

    def __init__(
        self,
        url: str,
        secret: str,
        *,
        timeout: float = 5.0,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        # Imported here: httpx and standardwebhooks load only with an HTTP hook.
        from standardwebhooks import Webhook

        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"the policy hook URL must be http(s)://..., got {url[:80]!r}")
        try:
            self._signer = Webhook(secret)
        except Exception:  # binascii.Error and the like: not a whsec_ secret
            raise ConfigError(
                "policy_hook_secret must be a Standard Webhooks secret (whsec_<base64>)"
            ) from None
        self.url = url
        self.timeout = timeout
        self._wall_clock = wall_clock  # signatures use real time: receivers check it

    async def decide(self, request: PolicyRequest) -> PolicyDecision:
        import httpx

        body = json.dumps(request.to_data(), separators=(",", ":"))
        msg_id = f"msg_{new_id()}"
        stamp = int(self._wall_clock())
        sent_at = datetime.fromtimestamp(stamp, UTC)
        headers = {
            "content-type": "application/json",
            "webhook-id": msg_id,
            "webhook-timestamp": str(stamp),
            "webhook-signature": self._signer.sign(msg_id, sent_at, body),
        }
        try:
            async with asyncio.timeout(self.timeout):
                async with (
                    httpx.AsyncClient(timeout=self.timeout, follow_redirects=False) as client,
                    client.stream("POST", self.url, content=body, headers=headers) as answer,
                ):
                    if answer.status_code != 200:
                        return _refused(f"it answered HTTP {answer.status_code}", request)
                    data = bytearray()
                    async for chunk in answer.aiter_bytes():
                        data.extend(chunk)
                        if len(data) > MAX_HOOK_RESPONSE_BYTES:
                            return _refused(
                                f"its answer is over {MAX_HOOK_RESPONSE_BYTES} bytes", request
                            )
        except TimeoutError:
            return _refused(f"no answer within {self.timeout:g}s", request)
        except httpx.HTTPError as exc:
            return _refused(f"{type(exc).__name__}", request)
        try:
            return _decision_of(bytes(data))
        except (ValueError, TypeError) as exc:
            return _refused(f"its answer is unreadable: {str(exc)[:200]}", request)


def policy_hook_from_settings(settings: JobsSettings) -> PolicyHook | None:
    """The hook `[jobs] policy_hook` names (None: none; ConfigError for a bad one)."""
    target = settings.policy_hook
    if target is None:
        return None
    if target.startswith(("http://", "https://")):
        if not settings.policy_hook_secret:
            raise ConfigError("an HTTP policy_hook needs policy_hook_secret (whsec_<base64>)")
        return HttpPolicyHook(target, settings.policy_hook_secret, timeout=settings.timeout)
    return PythonPolicyHook.load(target, timeout=settings.timeout)
