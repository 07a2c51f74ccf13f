"""The arm API of a wake service: arm one fire per job, cancel, list.

`ArmClient` is the seam a hosted scheduler's adapter implements (three calls); `RelayArms`
speaks the relay's wire contract (`agentcron relay`, seed 002):

    POST {relay}/provision  {job_id, fire_at, callback_url, dedup_key}  -> {schedule_id}
    POST {relay}/cancel     {job_id}                                    -> {ok: true}
    GET  {relay}/list                                                   -> {arms: [...]}

with `Authorization: Bearer <wake.relay_token>`. `fire_at` is ISO 8601 at second precision,
`dedup_key` is `"{job_id}:{fire_at}"`; a provision for a job replaces its earlier arm.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import httpx

from agentcron.errors import AgentcronError


class ArmError(AgentcronError):
    """A call to the wake service failed (it is retried by the next reconcile)."""


@dataclass(frozen=True, slots=True)
class Arm:
    """One armed fire as the wake service lists it."""

    job_id: str
    fire_at: datetime
    callback_url: str
    schedule_id: str = ""


def wire_time(at: datetime) -> datetime:
    """A due time as armed: UTC, rounded up to the whole second (the wire's precision), so a
    fire is never delivered before its job is due.
    """
    at = at.astimezone(UTC)
    whole = at.replace(microsecond=0)
    return whole if whole == at else whole + timedelta(seconds=1)


def wire_text(at: datetime) -> str:
    return wire_time(at).isoformat(timespec="seconds")


def dedup_key(job_id: str, fire_at: datetime) -> str:
    return f"{job_id}:{wire_text(fire_at)}"


class ArmClient(Protocol):
    """What ManagedWake needs of a wake service. An adapter for a hosted scheduler implements
    these three calls (and the service must POST `{callback_url}/api/cron/fire` with a token
    the configured verifier accepts).
    """

    async def provision(self, job_id: str, fire_at: datetime, callback_url: str) -> str: ...

    async def cancel(self, job_id: str) -> None: ...

    async def list(self) -> list[Arm]: ...

    async def aclose(self) -> None: ...


class RelayArms:
    """`ArmClient` for `agentcron relay` (or any service of the same wire contract)."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._client = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
            transport=transport,
        )

    async def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        try:
            response = await self._client.request(method, path, json=body)
        except httpx.HTTPError as exc:
            raise ArmError(f"{method} {path}: {type(exc).__name__}: {exc}") from exc
        if response.status_code >= 300:
            raise ArmError(f"{method} {path}: HTTP {response.status_code}: {response.text[:200]}")
        try:
            return response.json()
        except ValueError as exc:
            raise ArmError(f"{method} {path}: the answer is not JSON") from exc

    async def provision(self, job_id: str, fire_at: datetime, callback_url: str) -> str:
        data = await self._call(
            "POST",
            "/provision",
            {
                "job_id": job_id,
                "fire_at": wire_text(fire_at),
                "callback_url": callback_url,
                "dedup_key": dedup_key(job_id, fire_at),
            },
        )
        return str(data.get("schedule_id", "")) if isinstance(data, dict) else ""

    async def cancel(self, job_id: str) -> None:
        await self._call("POST", "/cancel", {"job_id": job_id})

    async def list(self) -> list[Arm]:
        data = await self._call("GET", "/list")
        rows = data.get("arms") if isinstance(data, dict) else None
        if not isinstance(rows, list):
            raise ArmError("GET /list: no list of arms")
        arms = []
        for row in rows:
            try:
                arms.append(
                    Arm(
                        job_id=str(row["job_id"]),
                        fire_at=datetime.fromisoformat(row["fire_at"]),
                        callback_url=str(row.get("callback_url", "")),
                        schedule_id=str(row.get("schedule_id", "")),
                    )
                )
            except (KeyError, TypeError, ValueError) as exc:
                raise ArmError(f"GET /list: an arm cannot be read: {row!r}") from exc
        return arms

    async def aclose(self) -> None:
        await self._client.aclose()
