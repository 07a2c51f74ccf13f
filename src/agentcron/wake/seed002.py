"""Seed 002's managed-cron contract: its arm client (`Seed002Arms`) and its fire verifier.

A seed-002 service (a portal that arms one-shots for its agents) is reached with the agent's
own bearer token (`wake.relay_token`; never logged):

    POST {portal}/api/agent-cron/provision {job_id, fire_at, agent_callback_url, dedup_key}
                                                                  -> {schedule_id}
    POST {portal}/api/agent-cron/cancel    {job_id}               -> {ok: true}
    GET  {portal}/api/agent-cron/list                             -> {arms: [{job_id, fire_at,
                                                                     agent_callback_url,
                                                                     schedule_id}]}

The seed names the list call without spelling it out; the form above is this adapter's reading
(docs/managed-wake.md). At `fire_at` the service POSTs `{agent_callback_url}/api/cron/fire`
`{job_id, fire_at}` with a short-lived JWT it signs (`Seed002FireVerifier`): `aud` = this
agent's audience, `iss` = the portal, `purpose == "cron_fire"`, `exp` (30 s leeway), verified
with PyJWT against the portal's JWKS. The token does not name the job; the body does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit

import httpx
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError

from agentcron.config.env import ConfigError
from agentcron.wake.arms import Arm, ArmError, dedup_key, wire_text
from agentcron.wake.verify import (
    LEEWAY,
    MAX_LIFETIME,
    FireClaims,
    FireRequestError,
    FireTokenError,
    JwksCache,
    body_job_id,
    decode_fire_token,
    parse_fire_at,
)

PROVISION = "/api/agent-cron/provision"
CANCEL = "/api/agent-cron/cancel"
LIST = "/api/agent-cron/list"
MAX_ANSWER_BYTES = 4 * 1024 * 1024  # a list of every arm of an agent
MAX_ID_CHARS = 200


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


A = TypeVar("A", bound=_Answer)


class _Provisioned(_Answer):
    schedule_id: str = Field(min_length=1, max_length=MAX_ID_CHARS)


class _Cancelled(_Answer):
    ok: Literal[True]


class _ListedArm(_Answer):
    job_id: str = Field(min_length=1, max_length=MAX_ID_CHARS)
    fire_at: AwareDatetime
    agent_callback_url: str = Field(max_length=2048)
    schedule_id: str = Field(default="", max_length=MAX_ID_CHARS)


class _Listed(_Answer):
    arms: list[_ListedArm]


def http_url(value: str, what: str) -> str:
    """`value` when it is an http(s) URL with a host (without a trailing slash)."""
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{what} must be an http(s) URL, got {value!r}")
    return value.rstrip("/")


class Seed002Arms:
    """`ArmClient` for a seed-002 managed-cron service."""

    def __init__(
        self,
        portal_url: str,
        token: str,
        *,
        timeout: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not token:
            raise ConfigError("the seed-002 service needs the agent's bearer token")
        self._token = token
        self._client = httpx.AsyncClient(
            base_url=http_url(portal_url, "the seed-002 portal URL"),
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
            transport=transport,
        )

    def __repr__(self) -> str:
        return f"Seed002Arms({str(self._client.base_url)!r})"  # never the token

    def _quiet(self, text: str) -> str:
        """`text` without the agent's token (a service may echo the request back)."""
        return text.replace(self._token, "<token>")

    async def _call(
        self, method: str, path: str, answer: type[A], body: Mapping[str, Any] | None = None
    ) -> A:
        try:
            response = await self._client.request(method, path, json=body)
        except httpx.HTTPError as exc:
            raise ArmError(self._quiet(f"{method} {path}: {type(exc).__name__}: {exc}")) from None
        if response.status_code in (401, 403):
            raise ArmError(f"{method} {path}: HTTP {response.status_code}: the token is refused")
        if response.status_code >= 300:
            text = self._quiet(response.text[:200])
            raise ArmError(f"{method} {path}: HTTP {response.status_code}: {text}")
        if len(response.content) > MAX_ANSWER_BYTES:
            raise ArmError(f"{method} {path}: the answer is larger than {MAX_ANSWER_BYTES} bytes")
        try:
            return answer.model_validate_json(response.content)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'answer'}: {e['msg']}" for e in exc.errors()[:3]
            )
            raise ArmError(f"{method} {path}: an unexpected answer ({problems})") from None

    async def provision(self, job_id: str, fire_at: datetime, callback_url: str) -> str:
        body = {
            "job_id": job_id,
            "fire_at": wire_text(fire_at),
            "agent_callback_url": callback_url,
            "dedup_key": dedup_key(job_id, fire_at),
        }
        return (await self._call("POST", PROVISION, _Provisioned, body)).schedule_id

    async def cancel(self, job_id: str) -> None:
        await self._call("POST", CANCEL, _Cancelled, {"job_id": job_id})

    async def list(self) -> list[Arm]:
        listed = await self._call("GET", LIST, _Listed)
        return [
            Arm(a.job_id, a.fire_at.astimezone(UTC), a.agent_callback_url, a.schedule_id)
            for a in listed.arms
        ]

    async def aclose(self) -> None:
        await self._client.aclose()


class Seed002FireVerifier:
    """`FireVerifier` for seed 002's fire token: signature (JWKS), `aud`, `iss`, `exp`/`nbf`
    with 30 s leeway, `purpose == "cron_fire"`, and an `exp` at most `MAX_LIFETIME` ahead (a
    short-lived token). The job is the body's `job_id` (a token that names a `job_id` must name
    the same one); `fire_at` is the body's, or now when the body leaves it out.
    """

    def __init__(
        self,
        keys: JwksCache,
        *,
        audience: str,
        issuer: str,
        leeway: timedelta = LEEWAY,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.keys = keys
        self.audience = audience
        self.issuer = issuer
        self.leeway = leeway
        self._now = now

    async def ready(self) -> None:
        """Fetch the JWKS (JwksError when it cannot be fetched)."""
        await self.keys.refresh()

    async def verify(self, token: str | None, body: Mapping[str, Any]) -> FireClaims:
        claims = await decode_fire_token(
            token,
            self.keys,
            audience=self.audience,
            issuer=self.issuer,
            leeway=self.leeway,
            require=["exp", "aud", "iss"],
        )
        try:
            ahead = float(claims["exp"]) - time.time()  # PyJWT's own clock for `exp`
        except (TypeError, ValueError):
            raise FireTokenError("invalid", "exp must be a number") from None
        if ahead > (MAX_LIFETIME + self.leeway).total_seconds():
            raise FireTokenError("lifetime", "the token lives longer than a fire token may")
        job_id = body_job_id(body)
        named = claims.get("job_id")
        if named is not None and named != job_id:
            raise FireTokenError("mismatch", "the body's job_id is not the token's")
        given = body.get("fire_at")
        try:
            fire_at = self._now() if given is None else parse_fire_at(given)
        except ValueError as exc:
            raise FireRequestError(f"fire_at: {exc}") from None
        jti = claims.get("jti")
        return FireClaims(job_id, fire_at, jti if isinstance(jti, str) else None)
