"""The agents a relay serves: a name, the `aud` of their fire tokens, and a bearer credential.

Kept in `{relay home}/agents.json` (0600): the credential is stored as its SHA-256 only and
shown once, by `agentcron relay add-agent NAME --audience AUD`. The file is read again when
it changes, so an agent added while the relay runs can call it at once.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentcron.config import ConfigError
from agentcron.relay.keys import _private_dir, _write_private

AGENTS_FILE = "agents.json"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True, slots=True)
class Agent:
    name: str
    audience: str


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class AgentRegistry:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.path = home / AGENTS_FILE
        self._rows: dict[str, dict[str, Any]] = {}
        self._stamp: tuple[float, int] | None = None
        self._lock = threading.Lock()

    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            self._rows, self._stamp = {}, None
            return self._rows
        if self._stamp != (stat.st_mtime, stat.st_size):
            try:
                data = json.loads(self.path.read_text("utf-8"))
            except (OSError, ValueError) as exc:
                raise ConfigError(f"cannot read the relay's agents {self.path}: {exc}") from None
            self._rows = {str(k): v for k, v in data.get("agents", {}).items()}
            self._stamp = (stat.st_mtime, stat.st_size)
        return self._rows

    def add(self, name: str, audience: str) -> str:
        """Add (or re-key) an agent; returns its new credential (shown once)."""
        if not _NAME.match(name):
            raise ConfigError(
                "an agent name is 1-64 letters, digits, '_', '.' or '-', starting with a "
                f"letter or digit; got {name!r}"
            )
        if not audience.strip() or len(audience) > 200:
            raise ConfigError("the audience is 1 to 200 characters, e.g. agent:my-agent")
        token = f"relay_{secrets.token_urlsafe(32)}"
        with self._lock:
            _private_dir(self.home)
            rows = dict(self._read())
            rows[name] = {
                "audience": audience.strip(),
                "token_sha256": _digest(token),
                "created": datetime.now(UTC).isoformat(timespec="seconds"),
            }
            _write_private(self.path, json.dumps({"agents": rows}, indent=1))
            self._stamp = None
        return token

    def remove(self, name: str) -> bool:
        with self._lock:
            rows = dict(self._read())
            if rows.pop(name, None) is None:
                return False
            _write_private(self.path, json.dumps({"agents": rows}, indent=1))
            self._stamp = None
            return True

    def all(self) -> list[Agent]:
        with self._lock:
            return [Agent(n, str(r["audience"])) for n, r in sorted(self._read().items())]

    def authenticate(self, token: str | None) -> Agent | None:
        """The agent whose credential `token` is (compared in constant time), else None."""
        if not token:
            return None
        digest = _digest(token)
        with self._lock:
            rows = self._read()
        found = None
        for name, row in rows.items():
            if hmac.compare_digest(digest, str(row.get("token_sha256", ""))):
                found = Agent(name, str(row["audience"]))
        return found
