"""The agents a relay serves: a name, the `aud` of their fire tokens, a bearer credential and
the origins the relay may call back for them.

Kept in `{relay home}/agents.json` (0600): the credential is stored as its SHA-256 only and
shown once, by `agentcron relay add-agent NAME --audience AUD --allow-origin URL`. The file is
read again when it changes, so an agent added (or an origin allowed) while the relay runs
counts at once. An agent stored before origins existed has none: its provisions are refused
until an operator runs `agentcron relay allow-origin NAME URL`.
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
from agentcron.errors import InvalidInputError
from agentcron.relay.callbacks import allowed_origin
from agentcron.relay.signing_keys import _private_dir, _write_private

AGENTS_FILE = "agents.json"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
MAX_ORIGINS = 50


@dataclass(frozen=True, slots=True)
class Agent:
    name: str
    audience: str
    origins: frozenset[str] = frozenset()  # scheme://host[:port] the relay may call back


def _agent(name: str, row: dict[str, Any]) -> Agent:
    return Agent(name, str(row["audience"]), frozenset(str(o) for o in row.get("origins", ())))


def _origins(urls: list[str]) -> list[str]:
    try:
        return list(dict.fromkeys(allowed_origin(u) for u in urls))
    except InvalidInputError as exc:
        raise ConfigError(str(exc)) from None


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

    def add(self, name: str, audience: str, origins: list[str] | None = None) -> str:
        """Add (or re-key) an agent; returns its new credential (shown once). `origins` are
        the callback origins allowed for it; None keeps a re-keyed agent's (none for a new one).
        """
        if not _NAME.match(name):
            raise ConfigError(
                "an agent name is 1-64 letters, digits, '_', '.' or '-', starting with a "
                f"letter or digit; got {name!r}"
            )
        if not audience.strip() or len(audience) > 200:
            raise ConfigError("the audience is 1 to 200 characters, e.g. agent:my-agent")
        allowed = None if origins is None else _origins(origins)
        if allowed is not None and len(allowed) > MAX_ORIGINS:
            raise ConfigError(f"at most {MAX_ORIGINS} origins per agent")
        token = f"relay_{secrets.token_urlsafe(32)}"
        with self._lock:
            _private_dir(self.home)
            rows = dict(self._read())
            if allowed is None:
                allowed = list(rows.get(name, {}).get("origins", []))
            rows[name] = {
                "audience": audience.strip(),
                "token_sha256": _digest(token),
                "created": datetime.now(UTC).isoformat(timespec="seconds"),
                "origins": allowed,
            }
            _write_private(self.path, json.dumps({"agents": rows}, indent=1))
            self._stamp = None
        return token

    def allow_origins(self, name: str, urls: list[str], *, revoke: bool = False) -> Agent:
        """Add `urls`' origins to the agent's allowed set (or take them out, `revoke`); the
        agent as it is now. ConfigError for an unknown agent or a URL that is no origin.
        """
        changed = _origins(urls)
        with self._lock:
            rows = dict(self._read())
            if name not in rows:
                raise ConfigError(f"no agent {name!r} (agentcron relay agents lists them)")
            row = dict(rows[name])
            current = [str(o) for o in row.get("origins", [])]
            if revoke:
                current = [o for o in current if o not in changed]
            else:
                current = list(dict.fromkeys([*current, *changed]))
            if len(current) > MAX_ORIGINS:
                raise ConfigError(f"at most {MAX_ORIGINS} origins per agent")
            row["origins"] = current
            rows[name] = row
            _write_private(self.path, json.dumps({"agents": rows}, indent=1))
            self._stamp = None
            return _agent(name, row)

    def get(self, name: str) -> Agent | None:
        """The agent `name` as stored now, None when there is none."""
        with self._lock:
            row = self._read().get(name)
        return None if row is None else _agent(name, row)

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
            return [_agent(n, r) for n, r in sorted(self._read().items())]

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
                found = _agent(name, row)
        return found
