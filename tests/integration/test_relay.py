"""The relay in one process: its API per agent, its keys, the delivery runner, and where it
calls back (allowed origins, no private address unless the operator allows it).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest

from agentcron.agent.runner import OutcomeStatus, Trigger
from agentcron.relay.agents import AgentRegistry
from agentcron.relay.server import RelayOptions, RelayServer, build
from agentcron.wake.verify import JwksCache, RelayFireVerifier

FAR = "2030-01-01T00:00:00+00:00"


@pytest.fixture
async def relay(tmp_path: Path) -> AsyncIterator[RelayServer]:
    # The agents of these tests are fake hosts (*.test): private callbacks are allowed, so
    # nothing is resolved; the address rule has its own tests below.
    server = build(
        RelayOptions(
            home=tmp_path / "relay", issuer="http://relay.test", deadline=2, allow_private=True
        )
    )
    async with server.app.router.lifespan_context(server.app):
        yield server


def client(server: RelayServer, token: str | None) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    transport = httpx.ASGITransport(app=server.app)
    return httpx.AsyncClient(transport=transport, base_url="http://relay.test", headers=headers)


async def test_each_agent_sees_and_cancels_only_its_own_arms(relay: RelayServer) -> None:
    one = relay.agents.add("one", "agent:one", ["http://a.test"])
    two = relay.agents.add("two", "agent:two", ["http://b.test"])
    arm = {
        "job_id": "j1",
        "fire_at": FAR,
        "callback_url": "http://a.test",
        "dedup_key": f"j1:{FAR}",
    }
    async with client(relay, one) as a, client(relay, two) as b, client(relay, None) as anon:
        assert (await anon.get("/list")).status_code == 401
        assert (await client(relay, "relay_wrong").get("/list")).status_code == 401
        first = (await a.post("/provision", json=arm)).json()["schedule_id"]
        assert (await a.post("/provision", json=arm)).json()["schedule_id"] == first  # idempotent
        assert (
            await b.post("/provision", json={**arm, "callback_url": "http://b.test"})
        ).status_code == 200
        assert [x["callback_url"] for x in (await a.get("/list")).json()["arms"]] == [
            "http://a.test"
        ]
        assert [x["callback_url"] for x in (await b.get("/list")).json()["arms"]] == [
            "http://b.test"
        ]
        # a new fire_at replaces the old arm
        later = "2030-01-01T00:01:00+00:00"
        moved = (await a.post("/provision", json={**arm, "fire_at": later})).json()["schedule_id"]
        assert moved != first
        assert [x["fire_at"] for x in (await a.get("/list")).json()["arms"]] == [later]
        # cancel is per agent; unknown is a no-op
        assert (await b.post("/cancel", json={"job_id": "j1"})).json() == {"ok": True}
        assert len((await a.get("/list")).json()["arms"]) == 1
        assert (await a.post("/cancel", json={"job_id": "nope"})).status_code == 200
        bad = await a.post("/provision", json={**arm, "fire_at": "2030-01-01T00:00:00"})
        assert bad.status_code == 422  # no UTC offset
        bad = await a.post("/provision", json={**arm, "callback_url": "ftp://x"})
        assert bad.status_code == 422


async def test_the_jwks_publishes_the_signing_key_and_tokens_verify(relay: RelayServer) -> None:
    async with client(relay, None) as anon:
        jwks = (await anon.get("/jwks.json")).json()
        assert (await anon.get("/.well-known/jwks.json")).json() == jwks
    (key,) = jwks["keys"]
    assert (key["kty"], key["crv"], key["alg"]) == ("OKP", "Ed25519", "EdDSA")
    assert "d" not in key  # public only
    token = relay.keys.mint(audience="agent:one", issuer=relay.issuer, job_id="j", fire_at=FAR)
    claims = jwt.decode(token, options={"verify_signature": False})
    assert claims["exp"] - claims["iat"] <= 120
    assert {"aud", "iss", "purpose", "job_id", "fire_at", "jti"} <= set(claims)

    def serve(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=relay.keys.jwks())

    cache = JwksCache(
        "http://relay.test/jwks.json",
        client=httpx.AsyncClient(transport=httpx.MockTransport(serve)),
    )
    verifier = RelayFireVerifier(cache, audience="agent:one", issuer="http://relay.test")
    assert (await verifier.verify(token, {"job_id": "j"})).job_id == "j"


def trigger(**payload: Any) -> Trigger:
    import json

    data = {"agent": "one", "audience": "agent:one", "job_id": "j", "fire_at": FAR,
            "callback_url": "http://agent.test"} | payload  # fmt: skip
    return Trigger("r", "arm", "arm:one:j", "agent_turn", None, json.dumps(data), datetime.now(UTC))


async def test_delivery_retries_until_a_2xx_and_records_each_attempt(relay: RelayServer) -> None:
    relay.agents.add("one", "agent:one", ["http://agent.test"])
    seen: list[httpx.Request] = []
    answers = iter([503, 500, 202])

    def agent(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if len(seen) == 1:
            raise httpx.ConnectError("refused")
        return httpx.Response(next(answers))

    relay.relay._transport = httpx.MockTransport(agent)
    relay.relay.deadline = 30
    outcome = await relay.relay.deliver(trigger())
    assert outcome.status is OutcomeStatus.SUCCEEDED
    assert "delivered after 4 attempt(s)" in (outcome.text or "")
    assert "ConnectError" in (outcome.text or "")
    assert "503" in (outcome.text or "")
    assert [r.url.path for r in seen] == ["/api/cron/fire"] * 4
    tokens = {r.headers["authorization"] for r in seen}
    assert len(tokens) == 4  # a fresh token (and jti) per attempt
    assert relay.relay.attempts == {"failed": 3, "delivered": 1}


async def test_delivery_gives_up_at_the_deadline(relay: RelayServer) -> None:
    relay.agents.add("one", "agent:one", ["http://agent.test"])
    relay.relay._transport = httpx.MockTransport(lambda request: httpx.Response(500))
    relay.relay.deadline = 1.2
    started = time.monotonic()
    outcome = await relay.relay.deliver(trigger())
    assert outcome.status is OutcomeStatus.FAILED
    assert time.monotonic() - started < 5
    assert "not delivered before the deadline" in (outcome.error or "")


async def test_a_past_arm_is_delivered_at_once_and_ends(relay: RelayServer, tmp_path: Path) -> None:
    got: list[dict[str, Any]] = []

    def agent(request: httpx.Request) -> httpx.Response:
        import json

        got.append(json.loads(request.content))
        return httpx.Response(202, json={"status": "accepted"})

    relay.relay._transport = httpx.MockTransport(agent)
    token = relay.agents.add("one", "agent:one", ["http://agent.test"])
    past = (datetime.now(UTC) - timedelta(seconds=5)).isoformat(timespec="seconds")
    async with client(relay, token) as a:
        await a.post(
            "/provision", json={"job_id": "j", "fire_at": past, "callback_url": "http://agent.test"}
        )
        for _ in range(200):
            if got and not (await a.get("/list")).json()["arms"]:
                break
            import asyncio

            await asyncio.sleep(0.05)
    assert got == [{"job_id": "j", "fire_at": past}]
    assert relay.relay.deliveries["delivered"] == 1


def test_add_agent_writes_an_owner_only_file_with_hashes_only(tmp_path: Path) -> None:
    registry = AgentRegistry(tmp_path / "relay")
    token = registry.add("one", "agent:one")
    text = registry.path.read_text()
    assert token not in text
    assert registry.path.stat().st_mode & 0o777 == 0o600
    assert registry.authenticate(token) is not None
    assert registry.authenticate(token + "x") is None
