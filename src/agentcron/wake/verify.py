"""The fire token's verifiers: the `FireVerifier` seam and the relay's JWT checked with PyJWT
against its JWKS (`RelayFireVerifier`, the default; seed 002's form is `wake/seed002.py`).

What a relay token must be to fire a job (docs/managed-wake.md):
- at most `MAX_TOKEN_BYTES` long; a JWS whose header names a `kid` of the relay's JWKS;
- signed with that key, by the one algorithm its key type allows (`EdDSA` for OKP Ed25519,
  `RS256` for RSA, `ES256` for EC P-256): `none` and every HS* are refused, whatever the header;
- `aud` = this agent's audience, `iss` = the relay's issuer, `exp` (required) and `nbf` within
  a 30 s leeway, a lifetime (`exp - iat`) of at most `MAX_LIFETIME`;
- `purpose == "cron_fire"`, and its `job_id` / `fire_at` equal to the request body's.

The JWKS is fetched with httpx (asynchronously), cached, refreshed one fetch at a time, and
again when a token names an unknown `kid` (a key rotation) at most once per `cooldown`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

import httpx
import jwt

from agentcron.errors import AgentcronError

log = logging.getLogger(__name__)

PURPOSE = "cron_fire"
LEEWAY = timedelta(seconds=30)
MAX_TOKEN_BYTES = 4096
MAX_LIFETIME = timedelta(seconds=300)
MAX_JWKS_BYTES = 256 * 1024
# The one algorithm each key type may sign with: pinned to the key, never taken from the token.
_ALG_OF_KEY = {("OKP", "Ed25519"): "EdDSA", ("RSA", None): "RS256", ("EC", "P-256"): "ES256"}


class FireTokenError(AgentcronError):
    """The fire token is not acceptable; `reason` is a short word for metrics and logs."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(detail or reason)
        self.reason = reason


class FireRequestError(AgentcronError):
    """The fire's body is not usable (no `job_id`, a `fire_at` that is not an instant): 400."""


class VerifierNotReadyError(AgentcronError):
    """The verifier cannot verify yet (its keys cannot be fetched): the wake stays local."""


class JwksError(VerifierNotReadyError):
    """The JWKS could not be fetched or read."""


def algorithm_for(jwk: Mapping[str, Any]) -> str | None:
    """The algorithm a JWK may verify, from its key type (None: a key type not accepted)."""
    kty = jwk.get("kty")
    curve = None if kty == "RSA" else jwk.get("crv")
    return _ALG_OF_KEY.get((str(kty), curve))


@dataclass(frozen=True, slots=True)
class _Key:
    key: Any
    algorithm: str


class JwksCache:
    """The relay's public keys by `kid`: fetched on `refresh`, and on an unknown `kid` at most
    once per `cooldown` seconds; concurrent refreshes share one fetch.
    """

    def __init__(
        self,
        url: str,
        *,
        client: httpx.AsyncClient | None = None,
        cooldown: float = 30.0,
        timeout: float = 5.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = url
        self._client = client
        self._cooldown = cooldown
        self._timeout = timeout
        self._monotonic = monotonic
        self._keys: dict[str, _Key] = {}
        self._lock = asyncio.Lock()
        self._last_unknown: float | None = None  # the last refresh an unknown kid caused
        self.fetches = 0

    async def refresh(self) -> None:
        """Fetch the JWKS now (one fetch at a time; a caller that waited for another's fetch
        does not fetch again). Raises JwksError when it cannot be fetched or read.
        """
        started = self.fetches
        async with self._lock:
            if self.fetches != started:
                return  # another caller fetched while we waited
            await self._fetch()

    async def get(self, kid: str) -> _Key | None:
        """The key `kid`; an unknown kid refreshes the set (at most once per cooldown)."""
        key = self._keys.get(kid)
        if key is not None:
            return key
        started = self.fetches
        async with self._lock:
            if self.fetches == started:
                now = self._monotonic()
                if self._last_unknown is not None and now - self._last_unknown < self._cooldown:
                    return self._keys.get(kid)
                self._last_unknown = now
                try:
                    await self._fetch()
                except JwksError as exc:
                    log.warning("fire token: cannot refresh the JWKS: %s", exc)
            return self._keys.get(kid)

    async def _fetch(self) -> None:
        self.fetches += 1
        try:
            if self._client is not None:
                response = await self._client.get(self.url, timeout=self._timeout)
            else:
                async with httpx.AsyncClient() as client:
                    response = await client.get(self.url, timeout=self._timeout)
            response.raise_for_status()
            if len(response.content) > MAX_JWKS_BYTES:
                raise JwksError(f"the JWKS at {self.url} is larger than {MAX_JWKS_BYTES} bytes")
            data = response.json()
        except httpx.HTTPError as exc:
            raise JwksError(f"cannot fetch the JWKS at {self.url}: {exc}") from exc
        except ValueError as exc:
            raise JwksError(f"the JWKS at {self.url} is not JSON") from exc
        self._keys = self._parse(data)

    def _parse(self, data: Any) -> dict[str, _Key]:
        if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
            raise JwksError(f"the JWKS at {self.url} has no list of keys")
        keys: dict[str, _Key] = {}
        for entry in data["keys"]:
            if not isinstance(entry, dict) or not isinstance(entry.get("kid"), str):
                continue
            algorithm = algorithm_for(entry)
            if algorithm is None or entry.get("alg", algorithm) != algorithm:
                log.warning("JWKS key %r: key type not accepted; ignored", entry.get("kid"))
                continue
            try:
                keys[entry["kid"]] = _Key(jwt.PyJWK(entry, algorithm).key, algorithm)
            except jwt.PyJWTError as exc:
                log.warning("JWKS key %r cannot be read: %s", entry.get("kid"), exc)
        return keys


@dataclass(frozen=True, slots=True)
class FireClaims:
    """A verified fire: the job, its fire time, and the token's id."""

    job_id: str
    fire_at: datetime
    jti: str | None


def parse_fire_at(value: Any) -> datetime:
    """An ISO 8601 instant with a UTC offset (what `fire_at` is on the wire)."""
    if not isinstance(value, str):
        raise ValueError("fire_at must be an ISO 8601 text")
    at = datetime.fromisoformat(value)
    if at.tzinfo is None:
        raise ValueError("fire_at needs a UTC offset")
    return at


class FireVerifier(Protocol):
    """What the fire webhook (`POST /api/cron/fire`) needs to accept a fire. `verify` checks
    the token first (a refusal is `FireTokenError`: 401, nothing runs), then the body
    (`FireRequestError`: 400); `ready` is awaited when the managed wake starts (a
    `VerifierNotReadyError` keeps the engine on its local timer and is retried).
    """

    @property
    def issuer(self) -> str: ...  # who signs the fires (status and logs)

    async def ready(self) -> None: ...

    async def verify(self, token: str | None, body: Mapping[str, Any]) -> FireClaims: ...


def body_job_id(body: Mapping[str, Any]) -> str:
    """The body's `job_id` (a non-empty text), else FireRequestError."""
    job_id = body.get("job_id")
    if not isinstance(job_id, str) or not job_id:
        raise FireRequestError("the body needs a job_id")
    return job_id


async def decode_fire_token(
    token: str | None,
    keys: JwksCache,
    *,
    audience: str,
    issuer: str,
    leeway: timedelta,
    require: list[str],
) -> dict[str, Any]:
    """The claims of a JWT signed by a key of `keys` (the algorithm pinned to the key's type),
    for `audience` from `issuer`, within its times (`leeway`), with the `require`d claims and
    `purpose == "cron_fire"`; else FireTokenError.
    """
    if not token:
        raise FireTokenError("missing", "no bearer token")
    if len(token) > MAX_TOKEN_BYTES:
        raise FireTokenError("oversized", f"the token is longer than {MAX_TOKEN_BYTES} bytes")
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError as exc:
        raise FireTokenError("malformed", str(exc)) from None
    kid, alg = header.get("kid"), header.get("alg")
    if not isinstance(kid, str) or not kid:
        raise FireTokenError("no_kid", "the token names no key (kid)")
    if alg not in set(_ALG_OF_KEY.values()):
        raise FireTokenError("algorithm", f"algorithm {alg!r} is not accepted")
    key = await keys.get(kid)
    if key is None:
        raise FireTokenError("unknown_kid", f"no key {kid!r} in the issuer's JWKS")
    if alg != key.algorithm:
        raise FireTokenError("algorithm", f"key {kid!r} verifies {key.algorithm} only")
    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            key.key,
            algorithms=[key.algorithm],
            audience=audience,
            issuer=issuer,
            leeway=leeway,
            options={"require": require},
        )
    except jwt.ExpiredSignatureError:
        raise FireTokenError("expired", "the token has expired") from None
    except jwt.ImmatureSignatureError:
        raise FireTokenError("not_yet_valid", "the token is not valid yet") from None
    except jwt.InvalidAudienceError:
        raise FireTokenError("audience", "the token is for another audience") from None
    except jwt.InvalidIssuerError:
        raise FireTokenError("issuer", "the token is from another issuer") from None
    except jwt.InvalidSignatureError:
        raise FireTokenError("signature", "the signature does not verify") from None
    except jwt.PyJWTError as exc:
        raise FireTokenError("invalid", str(exc)) from None
    if claims.get("purpose") != PURPOSE:
        raise FireTokenError("purpose", f"the token's purpose is not {PURPOSE!r}")
    return claims


class RelayFireVerifier:
    """The default `FireVerifier`: a token of `agentcron relay` (or a service signing the same
    form), checked against the JWKS, the audience, the issuer and the request body.
    """

    def __init__(
        self,
        keys: JwksCache,
        *,
        audience: str,
        issuer: str,
        leeway: timedelta = LEEWAY,
    ) -> None:
        self.keys = keys
        self.audience = audience
        self.issuer = issuer
        self.leeway = leeway

    async def ready(self) -> None:
        """Fetch the JWKS (JwksError when it cannot be fetched)."""
        await self.keys.refresh()

    async def verify(self, token: str | None, body: Mapping[str, Any]) -> FireClaims:
        """The fire the token allows, when it matches the body; else FireTokenError (or
        FireRequestError: a valid token, a body without `job_id`).
        """
        claims = await self.verify_token(token)
        body_job_id(body)
        return self.match(claims, body)

    async def verify_token(self, token: str | None) -> dict[str, Any]:
        """The claims of a fire token that verifies (signature, aud, iss, exp/nbf, purpose,
        lifetime); else FireTokenError. `match` then compares them with the request body.
        """
        claims = await decode_fire_token(
            token,
            self.keys,
            audience=self.audience,
            issuer=self.issuer,
            leeway=self.leeway,
            require=["exp", "iat", "aud", "iss"],
        )
        try:
            lifetime = float(claims["exp"]) - float(claims["iat"])
        except (TypeError, ValueError):
            raise FireTokenError("invalid", "exp and iat must be numbers") from None
        if lifetime > MAX_LIFETIME.total_seconds():
            raise FireTokenError("lifetime", "the token lives longer than a fire token may")
        return claims

    def match(self, claims: Mapping[str, Any], body: Mapping[str, Any]) -> FireClaims:
        """The fire of verified `claims`, when the body names the same job (and fire_at)."""
        job_id = claims.get("job_id")
        if not isinstance(job_id, str) or job_id != body.get("job_id"):
            raise FireTokenError("mismatch", "the body's job_id is not the token's")
        try:
            fire_at = parse_fire_at(claims.get("fire_at"))
        except ValueError:
            raise FireTokenError("invalid", "the token's fire_at is not an instant") from None
        given = body.get("fire_at")
        if given is not None:
            try:
                same = parse_fire_at(given) == fire_at
            except ValueError:
                same = False
            if not same:
                raise FireTokenError("mismatch", "the body's fire_at is not the token's")
        jti = claims.get("jti")
        return FireClaims(job_id, fire_at, jti if isinstance(jti, str) else None)
