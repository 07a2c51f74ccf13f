"""The relay's signing keys: Ed25519, generated on first start, rotatable.

They live in `{relay home}/keys/signing_keys.json` (file 0600 in a 0700 directory). The newest
key signs; the one before it stays in the JWKS until the next rotation, so tokens signed
before a rotation still verify while agents refresh their JWKS (they refresh on an unknown
`kid`). The file is read again when it changes, so `agentcron relay rotate-key` takes effect
in a running relay.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from jwt.algorithms import OKPAlgorithm

from agentcron.config import ConfigError

KEYS_FILE = "signing_keys.json"
ALGORITHM = "EdDSA"
PURPOSE = "cron_fire"
TOKEN_LIFETIME = 60  # seconds; at most 120 (docs/managed-wake.md)
_KEEP = 2  # the signing key and the one before it


@dataclass(frozen=True, slots=True)
class _Key:
    kid: str
    private: Ed25519PrivateKey
    created: str

    def public_jwk(self) -> dict[str, Any]:
        jwk: dict[str, Any] = OKPAlgorithm.to_jwk(self.private.public_key(), as_dict=True)
        return {**jwk, "kid": self.kid, "alg": ALGORITHM, "use": "sig"}


def _private_dir(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)


def _write_private(path: Path, text: str) -> None:
    """Write owner-only from the start, then move into place (never a half-written file)."""
    temp = path.with_suffix(f".{secrets.token_hex(4)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(temp, path)


def _new_key() -> _Key:
    created = datetime.now(UTC).isoformat(timespec="seconds")
    kid = f"{datetime.now(UTC):%Y%m%d}-{secrets.token_hex(6)}"
    return _Key(kid, Ed25519PrivateKey.generate(), created)


class SigningKeys:
    """The keys in `directory` (created with the first key when missing)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / KEYS_FILE
        self._keys: list[_Key] = []
        self._stamp: tuple[float, int] | None = None
        self._lock = threading.Lock()

    def load_or_create(self) -> None:
        with self._lock:
            _private_dir(self.directory)
            if not self.path.exists():
                self._save([_new_key()])
            self._load()

    def rotate(self) -> str:
        """A new signing key; the current one stays published, older ones go. Its kid."""
        with self._lock:
            _private_dir(self.directory)
            if self.path.exists():
                self._load()
            key = _new_key()
            self._save([*self._keys, key][-_KEEP:])
            self._load()
            return key.kid

    def _save(self, keys: list[_Key]) -> None:
        rows = [
            {
                "kid": k.kid,
                "created": k.created,
                "private_pem": k.private.private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.PKCS8,
                    serialization.NoEncryption(),
                ).decode(),
            }
            for k in keys
        ]
        _write_private(self.path, json.dumps({"keys": rows}, indent=1))

    def _load(self) -> None:
        try:
            stat = self.path.stat()
            data = json.loads(self.path.read_text("utf-8"))
            keys = []
            for row in data["keys"]:
                private = serialization.load_pem_private_key(row["private_pem"].encode(), None)
                if not isinstance(private, Ed25519PrivateKey):
                    raise TypeError("not an Ed25519 key")
                keys.append(_Key(row["kid"], private, row["created"]))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"cannot read the relay's signing keys {self.path}: {exc}") from None
        if not keys:
            raise ConfigError(f"the relay's signing keys {self.path} hold no key")
        self._keys, self._stamp = keys, (stat.st_mtime, stat.st_size)

    def _fresh(self) -> list[_Key]:
        """The keys, read again when the file changed (a rotation by the CLI)."""
        try:
            stat = self.path.stat()
            if self._stamp != (stat.st_mtime, stat.st_size):
                with self._lock:
                    self._load()
        except (OSError, ConfigError):
            pass  # keep what was read
        return self._keys

    def jwks(self) -> dict[str, Any]:
        return {"keys": [k.public_jwk() for k in reversed(self._fresh())]}

    def mint(
        self,
        *,
        audience: str,
        issuer: str,
        job_id: str,
        fire_at: str,
        lifetime: int = TOKEN_LIFETIME,
        now: float | None = None,
    ) -> str:
        """A fire token: `aud`, `iss`, `purpose`, `job_id`, `fire_at`, `jti`, `iat`/`nbf`/
        `exp` (`lifetime` seconds, at most 120), signed by the newest key.
        """
        lifetime = min(lifetime, 120)
        key = self._fresh()[-1]
        issued = int(time.time() if now is None else now)
        claims = {
            "iss": issuer,
            "aud": audience,
            "purpose": PURPOSE,
            "job_id": job_id,
            "fire_at": fire_at,
            "jti": secrets.token_urlsafe(16),
            "iat": issued,
            "nbf": issued,
            "exp": issued + lifetime,
        }
        return jwt.encode(claims, key.private, algorithm=ALGORITHM, headers={"kid": key.kid})
