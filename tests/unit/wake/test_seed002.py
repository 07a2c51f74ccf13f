"""Seed 002's arm client and fire verifier against a local fake of the contract, served on
loopback (tests/helpers/seed002.py): real HTTP, a real RSA key, tokens forged every way the
seed lists.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import jwt
import pytest

from agentcron.config.env import ConfigError
from agentcron.wake.arms import ArmError
from agentcron.wake.seed002 import Seed002Arms, Seed002FireVerifier, http_url
from agentcron.wake.verify import FireRequestError, FireTokenError, JwksCache
from tests.helpers.seed002 import AGENT_TOKEN, AUDIENCE, FakeSeed002, rsa_key, running
from tests.helpers.ws import free_port

AT = datetime(2026, 6, 18, 12, 34, 56, 250_000, tzinfo=UTC)
CALLBACK = "https://agent-xyz.example"


@pytest.fixture
async def service() -> AsyncIterator[FakeSeed002]:
    async with running() as found:
        yield found


@pytest.fixture
async def arms(service: FakeSeed002) -> AsyncIterator[Seed002Arms]:
    client = Seed002Arms(service.base + "/", AGENT_TOKEN)
    yield client
    await client.aclose()


def verifier(service: FakeSeed002, **kw: Any) -> Seed002FireVerifier:
    return Seed002FireVerifier(
        JwksCache(service.jwks_url), audience=AUDIENCE, issuer=service.base, **kw
    )


async def test_provision_list_cancel_speak_the_contract(
    service: FakeSeed002, arms: Seed002Arms
) -> None:
    schedule = await arms.provision("ab12cd34", AT, CALLBACK)
    assert schedule.startswith("sch-")
    path, body = service.calls[-1]
    # the seed's body: second-precision fire_at (rounded up: never early), its dedup key
    assert (path, body) == ("provision", {
        "job_id": "ab12cd34", "fire_at": "2026-06-18T12:34:57+00:00",
        "agent_callback_url": CALLBACK, "dedup_key": "ab12cd34:2026-06-18T12:34:57+00:00",
    })  # fmt: skip
    assert service.auth[-1] == f"Bearer {AGENT_TOKEN}"
    # the same fire again is idempotent (same schedule); a new fire_at replaces the arm
    assert await arms.provision("ab12cd34", AT, CALLBACK) == schedule
    assert await arms.provision("ab12cd34", AT + timedelta(minutes=1), CALLBACK) != schedule
    [armed] = await arms.list()
    assert (armed.job_id, armed.fire_at, armed.callback_url) == (
        "ab12cd34", datetime(2026, 6, 18, 12, 35, 57, tzinfo=UTC), CALLBACK,
    )  # fmt: skip
    assert armed.schedule_id.startswith("sch-")
    await arms.cancel("ab12cd34")
    await arms.cancel("never-armed")  # unknown: a no-op
    assert await arms.list() == []


async def test_errors_are_typed_and_never_carry_the_token(
    service: FakeSeed002, arms: Seed002Arms, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    service.mode = "down"
    with pytest.raises(ArmError, match="HTTP 503"):
        await arms.provision("j1", AT, CALLBACK)
    service.mode = "garbage"
    with pytest.raises(ArmError, match=r"unexpected answer.*schedule_id"):
        await arms.provision("j1", AT, CALLBACK)
    with pytest.raises(ArmError, match=r"unexpected answer.*fire_at"):
        await arms.list()
    service.mode = "ok"
    wrong = Seed002Arms(service.base, "not-the-agents-token")
    with pytest.raises(ArmError, match="HTTP 401: the token is refused"):
        await wrong.list()
    await wrong.aclose()
    gone = Seed002Arms(f"http://127.0.0.1:{free_port()}", AGENT_TOKEN)  # nothing listens
    with pytest.raises(ArmError, match="ConnectError") as caught:
        await gone.cancel("j1")
    await gone.aclose()
    assert AGENT_TOKEN not in str(caught.value)
    assert AGENT_TOKEN not in repr(gone)
    assert AGENT_TOKEN not in caplog.text


async def test_an_answer_echoing_the_token_is_quieted() -> None:
    def echo(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500, text=f"bad request with {request.headers['authorization']}")

    arms = Seed002Arms("http://portal.test", AGENT_TOKEN, transport=httpx.MockTransport(echo))
    with pytest.raises(ArmError) as caught:
        await arms.cancel("j1")
    assert AGENT_TOKEN not in str(caught.value)
    assert "<token>" in str(caught.value)
    await arms.aclose()


def test_the_portal_url_and_token_are_checked() -> None:
    with pytest.raises(ConfigError, match="http"):
        Seed002Arms("ftp://portal.test", AGENT_TOKEN)
    with pytest.raises(ConfigError, match="token"):
        Seed002Arms("https://portal.test", "")
    assert http_url("https://portal.test/", "x") == "https://portal.test"


async def test_a_valid_fire_token_gives_the_bodys_fire(service: FakeSeed002) -> None:
    v = verifier(service)
    await v.ready()
    fire = await v.verify(service.mint(), {"job_id": "j1", "fire_at": "2026-06-18T12:34:57+00:00"})
    assert (fire.job_id, fire.fire_at) == ("j1", datetime(2026, 6, 18, 12, 34, 57, tzinfo=UTC))
    assert fire.jti
    # only job_id is required: a body without fire_at is a fire now
    now = datetime(2030, 1, 1, tzinfo=UTC)
    fire = await verifier(service, now=lambda: now).verify(service.mint(), {"job_id": "j1"})
    assert fire.fire_at == now
    # a token that names the job must name the body's
    named = service.mint(job_id="j1")
    assert (await v.verify(named, {"job_id": "j1"})).job_id == "j1"


async def refused(v: Seed002FireVerifier, token: str | None, reason: str) -> None:
    with pytest.raises(FireTokenError) as caught:
        await v.verify(token, {"job_id": "j1"})
    assert caught.value.reason == reason, caught.value


async def test_forged_expired_and_foreign_tokens_are_refused(service: FakeSeed002) -> None:
    v = verifier(service)
    now = int(time.time())
    await refused(v, None, "missing")
    await refused(v, service.mint(key=rsa_key()), "signature")  # another key, the same kid
    await refused(v, service.mint(exp=now - 100, iat=now - 160), "expired")
    await refused(v, service.mint(nbf=now + 100, exp=now + 160), "not_yet_valid")
    await refused(v, service.mint(aud="agent:someone-else"), "audience")
    await refused(v, service.mint(iss="https://evil.example"), "issuer")
    await refused(v, service.mint(purpose="login"), "purpose")  # a general agent JWT
    await refused(v, service.mint(purpose=None), "purpose")
    await refused(v, service.mint(exp=None), "invalid")  # exp is required
    await refused(v, service.mint(exp=now + 3600), "lifetime")  # not short-lived
    await refused(v, service.mint(headers={"kid": "nas-unknown"}), "unknown_kid")
    await refused(v, service.mint(job_id="j2"), "mismatch")
    hs = jwt.encode({"aud": AUDIENCE, "iss": service.base, "purpose": "cron_fire",
                     "exp": now + 60}, "s" * 32, algorithm="HS256", headers={"kid": service.kid})  # fmt: skip
    await refused(v, hs, "algorithm")


async def test_a_bad_body_with_a_good_token_is_a_request_error(service: FakeSeed002) -> None:
    v = verifier(service)
    with pytest.raises(FireRequestError, match="job_id"):
        await v.verify(service.mint(), {"fire_at": "2026-06-18T12:34:57+00:00"})
    with pytest.raises(FireRequestError, match="fire_at"):
        await v.verify(service.mint(), {"job_id": "j1", "fire_at": "2026-06-18T12:34:57"})
    # the token is checked first: a bad token with a bad body is a 401, not a 400
    with pytest.raises(FireTokenError):
        await v.verify(service.mint(aud="x"), {})
