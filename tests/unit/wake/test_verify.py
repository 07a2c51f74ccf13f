"""The fire token's verifier with real keys (Ed25519 from the relay's key file, RSA), a JWKS
served by an in-memory transport, and tokens forged every way the issue lists.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import time
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric.rsa import generate_private_key
from jwt.algorithms import RSAAlgorithm

from agentcron.relay.signing_keys import SigningKeys
from agentcron.wake.verify import (
    MAX_TOKEN_BYTES,
    FireTokenError,
    JwksCache,
    JwksError,
    RelayFireVerifier,
)

AUD, ISS = "agent:one", "http://relay.test"
JOB, FIRE_AT = "01JOB", "2026-06-18T12:34:56+00:00"
BODY = {"job_id": JOB, "fire_at": FIRE_AT}


class Jwks:
    """A JWKS endpoint whose keys the test changes; counts its fetches."""

    def __init__(self, keys: SigningKeys) -> None:
        self.keys = keys
        self.fetches = 0
        self.up = True

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.fetches += 1
        if not self.up:
            return httpx.Response(503)
        return httpx.Response(200, json=self.keys.jwks())

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self.handler))


@pytest.fixture
def keys(tmp_path: Path) -> SigningKeys:
    found = SigningKeys(tmp_path / "keys")
    found.load_or_create()
    return found


@pytest.fixture
def jwks(keys: SigningKeys) -> Jwks:
    return Jwks(keys)


def verifier(jwks: Jwks, cooldown: float = 30.0) -> RelayFireVerifier:
    cache = JwksCache("http://relay.test/jwks.json", client=jwks.client(), cooldown=cooldown)
    return RelayFireVerifier(cache, audience=AUD, issuer=ISS)


def mint(keys: SigningKeys, **changes: Any) -> str:
    return keys.mint(audience=AUD, issuer=ISS, job_id=JOB, fire_at=FIRE_AT, **changes)


def current_kid(keys: SigningKeys) -> str:
    """The kid of the key that signs now: the one a freshly minted token names."""
    kid: str = jwt.get_unverified_header(mint(keys))["kid"]
    return kid


def forge(keys: SigningKeys, claims: dict[str, Any], headers: dict[str, Any] | None = None) -> str:
    """A token signed by the relay's current key with claims of the test's choosing."""
    now = int(time.time())
    base = {"iss": ISS, "aud": AUD, "purpose": "cron_fire", "job_id": JOB, "fire_at": FIRE_AT,
            "jti": "j", "iat": now, "nbf": now, "exp": now + 60}  # fmt: skip
    key = keys._fresh()[-1]
    return jwt.encode(
        {**base, **claims},
        key.private,
        algorithm="EdDSA",
        headers={"kid": key.kid, **(headers or {})},
    )


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


async def refused(
    v: RelayFireVerifier, token: str | None, reason: str, body: dict[str, Any] = BODY
) -> None:
    with pytest.raises(FireTokenError) as caught:
        await v.verify(token, body)
    assert caught.value.reason == reason, caught.value


async def test_a_valid_token_gives_its_fire(keys: SigningKeys, jwks: Jwks) -> None:
    fire = await verifier(jwks).verify(mint(keys), BODY)
    assert (fire.job_id, fire.fire_at.isoformat()) == (JOB, FIRE_AT)
    assert fire.jti
    # the body may leave fire_at out; job_id is what it must name
    assert (await verifier(jwks).verify(mint(keys), {"job_id": JOB})).job_id == JOB


async def test_expired_and_not_yet_valid_tokens_are_refused(keys: SigningKeys, jwks: Jwks) -> None:
    v = verifier(jwks)
    now = int(time.time())
    await refused(v, forge(keys, {"iat": now - 200, "nbf": now - 200, "exp": now - 100}), "expired")
    await refused(v, forge(keys, {"iat": now, "nbf": now + 100, "exp": now + 160}), "not_yet_valid")
    # within the 30 s leeway both pass
    await v.verify(forge(keys, {"iat": now - 80, "nbf": now - 80, "exp": now - 20}), BODY)
    await v.verify(forge(keys, {"iat": now, "nbf": now + 20, "exp": now + 80}), BODY)
    # a token that would live longer than a fire token may
    await refused(v, forge(keys, {"exp": now + 3600}), "lifetime")
    await refused(v, forge(keys, {"exp": None}), "invalid")


@pytest.mark.parametrize(
    ("claims", "reason"),
    [
        ({"aud": "agent:other"}, "audience"),
        ({"iss": "http://evil.test"}, "issuer"),
        ({"purpose": "login"}, "purpose"),
        ({"purpose": None}, "purpose"),
    ],
)
async def test_wrong_audience_issuer_or_purpose_is_refused(
    keys: SigningKeys, jwks: Jwks, claims: dict[str, Any], reason: str
) -> None:
    await refused(verifier(jwks), forge(keys, claims), reason)


async def test_a_tampered_payload_is_refused(keys: SigningKeys, jwks: Jwks) -> None:
    header, payload, signature = mint(keys).split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    claims["job_id"] = "01OTHER"
    tampered = f"{header}.{b64(json.dumps(claims).encode())}.{signature}"
    await refused(verifier(jwks), tampered, "signature", {"job_id": "01OTHER"})


async def test_a_token_signed_by_another_key_is_refused(
    keys: SigningKeys, jwks: Jwks, tmp_path: Path
) -> None:
    other = SigningKeys(tmp_path / "other")
    other.load_or_create()
    key = other._fresh()[-1]
    claims = jwt.decode(mint(keys), options={"verify_signature": False})
    token = jwt.encode(claims, key.private, algorithm="EdDSA", headers={"kid": current_kid(keys)})
    await refused(verifier(jwks), token, "signature")


async def test_alg_none_is_refused(keys: SigningKeys, jwks: Jwks) -> None:
    claims = jwt.decode(mint(keys), options={"verify_signature": False})
    head = b64(json.dumps({"alg": "none", "typ": "JWT", "kid": current_kid(keys)}).encode())
    token = f"{head}.{b64(json.dumps(claims).encode())}."
    await refused(verifier(jwks), token, "algorithm")


async def test_hs256_signed_with_the_public_key_is_refused(keys: SigningKeys, jwks: Jwks) -> None:
    claims = jwt.decode(mint(keys), options={"verify_signature": False})
    public = keys.jwks()["keys"][0]
    head = b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": public["kid"]}).encode())
    signing_input = f"{head}.{b64(json.dumps(claims).encode())}"
    for secret in (public["x"].encode(), json.dumps(public).encode()):
        mac = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
        await refused(verifier(jwks), f"{signing_input}.{b64(mac)}", "algorithm")


async def test_an_algorithm_other_than_the_keys_is_refused(tmp_path: Path) -> None:
    """An RSA key verifies RS256 only: a PS256 or ES256 header for it is refused."""
    private = generate_private_key(public_exponent=65537, key_size=2048)
    jwk = {**RSAAlgorithm.to_jwk(private.public_key(), as_dict=True), "kid": "rsa1"}

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"keys": [jwk]})

    cache = JwksCache(
        "http://x/jwks", client=httpx.AsyncClient(transport=httpx.MockTransport(handler))
    )
    v = RelayFireVerifier(cache, audience=AUD, issuer=ISS)
    now = int(time.time())
    claims = {"iss": ISS, "aud": AUD, "purpose": "cron_fire", "job_id": JOB, "fire_at": FIRE_AT,
              "iat": now, "exp": now + 60}  # fmt: skip
    good = jwt.encode(claims, private, algorithm="RS256", headers={"kid": "rsa1"})
    assert (await v.verify(good, BODY)).job_id == JOB
    ps = jwt.encode(claims, private, algorithm="PS256", headers={"kid": "rsa1"})
    with pytest.raises(FireTokenError) as caught:
        await v.verify(ps, BODY)
    assert caught.value.reason == "algorithm"


async def test_an_unknown_kid_refreshes_the_jwks_once_per_cooldown(
    keys: SigningKeys, jwks: Jwks
) -> None:
    v = verifier(jwks, cooldown=3600)
    await v.keys.refresh()
    assert jwks.fetches == 1
    old_kid = current_kid(keys)
    token_old = mint(keys)
    new_kid = keys.rotate()
    assert new_kid != old_kid
    # both keys are published during the overlap
    assert {k["kid"] for k in keys.jwks()["keys"]} == {old_kid, new_kid}
    # a token of the new key: its kid is unknown, the cache refreshes and it verifies
    assert (await v.verify(mint(keys), BODY)).job_id == JOB
    assert jwks.fetches == 2
    assert (await v.verify(token_old, BODY)).job_id == JOB  # the old key still verifies
    # a kid nobody knows: no new fetch within the cooldown
    await refused(v, forge(keys, {}, {"kid": "nobody"}), "unknown_kid")
    assert jwks.fetches == 2
    # a second rotation retires the first key
    keys.rotate()
    assert old_kid not in {k["kid"] for k in keys.jwks()["keys"]}


async def test_unknown_kid_after_the_cooldown_fetches_again(keys: SigningKeys, jwks: Jwks) -> None:
    v = verifier(jwks, cooldown=0)
    await v.keys.refresh()
    await refused(v, forge(keys, {}, {"kid": "nobody"}), "unknown_kid")
    await refused(v, forge(keys, {}, {"kid": "nobody"}), "unknown_kid")
    assert jwks.fetches == 3


async def test_concurrent_refreshes_share_one_fetch(keys: SigningKeys, jwks: Jwks) -> None:
    v = verifier(jwks, cooldown=0)
    await v.keys.refresh()
    keys.rotate()
    tokens = [mint(keys) for _ in range(5)]
    results = await asyncio.gather(*(v.verify(t, BODY) for t in tokens))
    assert {r.job_id for r in results} == {JOB}
    assert jwks.fetches == 2


async def test_an_unreachable_jwks_raises_and_refuses(keys: SigningKeys, jwks: Jwks) -> None:
    jwks.up = False
    v = verifier(jwks)
    with pytest.raises(JwksError):
        await v.keys.refresh()
    await refused(v, mint(keys), "unknown_kid")


async def test_body_and_claims_must_match(keys: SigningKeys, jwks: Jwks) -> None:
    v = verifier(jwks)
    await refused(v, mint(keys), "mismatch", {"job_id": "01OTHER", "fire_at": FIRE_AT})
    await refused(
        v, mint(keys), "mismatch", {"job_id": JOB, "fire_at": "2026-06-18T12:35:56+00:00"}
    )
    await refused(v, mint(keys), "mismatch", {"job_id": JOB, "fire_at": "not a time"})
    # the same instant written another way matches
    assert (
        await v.verify(mint(keys), {"job_id": JOB, "fire_at": "2026-06-18T14:34:56+02:00"})
    ).job_id == JOB


async def test_missing_malformed_and_oversized_tokens_are_refused(
    keys: SigningKeys, jwks: Jwks
) -> None:
    v = verifier(jwks)
    await refused(v, None, "missing")
    await refused(v, "", "missing")
    await refused(v, "not-a-jwt", "malformed")
    await refused(v, forge(keys, {"pad": "x" * MAX_TOKEN_BYTES}), "oversized")
    head = b64(json.dumps({"alg": "EdDSA"}).encode())
    await refused(v, f"{head}.e30.sig", "no_kid")


def test_the_key_file_is_owner_only(keys: SigningKeys) -> None:
    assert keys.path.stat().st_mode & 0o777 == 0o600
    assert keys.directory.stat().st_mode & 0o777 == 0o700
    again = SigningKeys(keys.directory)
    again.load_or_create()
    assert current_kid(again) == current_kid(keys)  # persisted, not regenerated
