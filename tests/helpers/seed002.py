"""A local fake of a seed-002 managed-cron service (the portal of seed 002), served for real.

It keeps one arm per job (`POST /api/agent-cron/provision`, `/cancel`, `GET /list`, each with
the agent's bearer token), publishes an RSA key at `/.well-known/jwks.json`, and plays the
portal's relay hop on demand: `fire(job_id)` mints a short-lived RS256 JWT (`aud`, `iss`,
`purpose: "cron_fire"`, `exp`) and POSTs `{agent_callback_url}/api/cron/fire` with it, as
the seed's Endpoint 3 does at `fire_at`.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import jwt
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey, generate_private_key
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from jwt.algorithms import RSAAlgorithm

from tests.helpers.ws import free_port, listening

AGENT_TOKEN = "nous-agent-token-0123456789"  # the agent's portal token (seed 002, hop 1)
AUDIENCE = "agent:inst-1"
JWKS_PATH = "/.well-known/jwks.json"


def rsa_key() -> RSAPrivateKey:
    return generate_private_key(public_exponent=65537, key_size=2048)


@dataclass
class Armed:
    job_id: str
    fire_at: str
    agent_callback_url: str
    schedule_id: str


class FakeSeed002:
    """The service's state and its app. `mode` makes it misbehave: `down` (503 to every agent
    call), `garbage` (answers that are not the contract's).
    """

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.key = rsa_key()
        self.kid = f"nas-{secrets.token_hex(4)}"
        self.arms: dict[str, Armed] = {}
        self.calls: list[tuple[str, dict[str, Any]]] = []  # (path, body) of each agent call
        self.auth: list[str] = []  # the Authorization header of each agent call
        self.mode = "ok"
        self.app = self._app()

    @property
    def jwks_url(self) -> str:
        return self.base + JWKS_PATH

    def jwks(self) -> dict[str, Any]:
        jwk = RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        return {"keys": [{**jwk, "kid": self.kid, "alg": "RS256", "use": "sig"}]}

    def mint(
        self,
        *,
        key: RSAPrivateKey | None = None,
        headers: dict[str, Any] | None = None,
        **claims: Any,
    ) -> str:
        """A fire token as the portal mints it (claims given override; None drops one)."""
        now = int(time.time())
        base: dict[str, Any] = {"aud": AUDIENCE, "iss": self.base, "purpose": "cron_fire",
                                "iat": now, "exp": now + 90, "jti": secrets.token_hex(8)}  # fmt: skip
        merged = {k: v for k, v in {**base, **claims}.items() if v is not None}
        return jwt.encode(
            merged, key or self.key, algorithm="RS256", headers={"kid": self.kid, **(headers or {})}
        )

    async def fire(
        self, job_id: str, *, token: str | None = None, fire_at: str | None = None
    ) -> httpx.Response:
        """The relay hop: POST the job's callback with a fresh token (or `token`); the body's
        `fire_at` is the armed one (or `fire_at`).
        """
        armed = self.arms[job_id]
        body = {"job_id": job_id, "fire_at": fire_at or armed.fire_at}
        async with httpx.AsyncClient(timeout=10) as client:
            return await client.post(
                f"{armed.agent_callback_url}/api/cron/fire",
                json=body,
                headers={"Authorization": f"Bearer {token or self.mint()}"},
            )

    def _refused(self, request: Request) -> Response | None:
        self.auth.append(request.headers.get("authorization", ""))
        if request.headers.get("authorization") != f"Bearer {AGENT_TOKEN}":
            return JSONResponse({"error": "unauthorized"}, 401)
        if self.mode == "down":
            return JSONResponse({"error": "unavailable"}, 503)
        return None

    def _app(self) -> FastAPI:
        app = FastAPI()

        @app.get(JWKS_PATH)
        async def jwks() -> dict[str, Any]:
            return self.jwks()

        @app.post("/api/agent-cron/provision")
        async def provision(request: Request) -> Response:
            body = await request.json()
            self.calls.append(("provision", body))
            if (refused := self._refused(request)) is not None:
                return refused
            if self.mode == "garbage":
                return JSONResponse({"schedule": 7})
            job_id, fire_at = body["job_id"], body["fire_at"]
            if body["dedup_key"] != f"{job_id}:{fire_at}":
                return JSONResponse({"error": "bad dedup_key"}, 422)
            # upsert by job: the same fire keeps its schedule, a new fire_at replaces it
            old = self.arms.get(job_id)
            same = old is not None and old.fire_at == fire_at
            schedule_id = old.schedule_id if same and old else f"sch-{secrets.token_hex(4)}"
            self.arms[job_id] = Armed(job_id, fire_at, body["agent_callback_url"], schedule_id)
            return JSONResponse({"schedule_id": schedule_id})

        @app.post("/api/agent-cron/cancel")
        async def cancel(request: Request) -> Response:
            body = await request.json()
            self.calls.append(("cancel", body))
            if (refused := self._refused(request)) is not None:
                return refused
            self.arms.pop(body["job_id"], None)  # unknown: a 200 no-op
            return JSONResponse({"ok": True})

        @app.get("/api/agent-cron/list")
        async def listed(request: Request) -> Response:
            self.calls.append(("list", {}))
            if (refused := self._refused(request)) is not None:
                return refused
            if self.mode == "garbage":
                return JSONResponse({"arms": [{"job_id": "x", "fire_at": "soon"}]})
            rows = [vars(a) for a in self.arms.values()]
            return JSONResponse({"arms": rows})

        return app

    def count(self, path: str) -> int:
        return sum(1 for called, _ in self.calls if called == path)


@asynccontextmanager
async def running(service: FakeSeed002 | None = None) -> AsyncIterator[FakeSeed002]:
    """A fake seed-002 service listening on loopback for the block."""
    service = service or FakeSeed002()
    async with listening(service.app, port=service.port):
        yield service
