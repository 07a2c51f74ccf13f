"""Where the relay calls back: only an agent's allowed origins, and no loopback, link-local,
private, unspecified or multicast address unless the operator allows private callbacks;
checked at provisioning and again at delivery (DNS can change).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from agentcron.agent.runner import OutcomeStatus, Trigger
from agentcron.cli import app as main
from agentcron.relay.agents import AgentRegistry
from agentcron.relay.callbacks import (
    ALLOW_PRIVATE_ENV,
    InvalidCallbackError,
    allowed_origin,
    forbidden_reason,
    origin_of,
)
from agentcron.relay.server import RelayOptions, RelayServer, build

FAR = "2030-01-01T00:00:00+00:00"
PUBLIC = "93.184.215.14"  # a global unicast address; never connected to here


@dataclass
class Agent:
    """A real HTTP server on loopback standing in for an agent: records each request."""

    requests: list[dict[str, Any]] = field(default_factory=list)
    port: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode()
        lines = head.split("\r\n")
        headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
        size = int(headers.get("Content-Length", headers.get("content-length", "0")))
        body = await reader.readexactly(size)
        self.requests.append(
            {"line": lines[0], "host": headers.get("Host", headers.get("host")), "body": body}
        )
        writer.write(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        await writer.drain()
        writer.close()


@pytest.fixture
async def agent() -> AsyncIterator[Agent]:
    found = Agent()
    server = await asyncio.start_server(found.handle, "127.0.0.1", 0)
    found.port = server.sockets[0].getsockname()[1]
    async with server:
        yield found


class Dns:
    """The relay's resolver with answers the test sets (one per call, the last repeats)."""

    def __init__(self) -> None:
        self.answers: dict[str, list[list[str]]] = {}
        self.calls: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append(host)
        queue = self.answers.get(host)
        if not queue:
            raise OSError(f"no such host {host}")
        return queue.pop(0) if len(queue) > 1 else queue[0]


@pytest.fixture
async def make_relay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Callable[..., Any]]:
    monkeypatch.delenv(ALLOW_PRIVATE_ENV, raising=False)
    servers: list[tuple[RelayServer, Any]] = []

    async def factory(dns: Dns | None = None, **options: Any) -> RelayServer:
        server = build(RelayOptions(home=tmp_path / "relay", issuer="http://relay.test", **options))
        if dns is not None:
            server.relay.guard.resolve = dns
        context = server.app.router.lifespan_context(server.app)
        await context.__aenter__()
        servers.append((server, context))
        return server

    yield factory
    for _, context in reversed(servers):
        await context.__aexit__(None, None, None)


def client(server: RelayServer, token: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=server.app),
        base_url="http://relay.test",
        headers={"Authorization": f"Bearer {token}"},
    )


async def provision(server: RelayServer, token: str, callback_url: str) -> httpx.Response:
    async with client(server, token) as api:
        return await api.post(
            "/provision", json={"job_id": "j", "fire_at": FAR, "callback_url": callback_url}
        )


def trigger_of(server: RelayServer, arm: dict[str, Any]) -> Trigger:
    """The trigger the relay's engine would hand its runner for this arm."""
    data = {"agent": "one", "audience": "agent:one", "job_id": "j", "fire_at": FAR} | arm
    return Trigger("r", "arm", "arm:one:j", "agent_turn", None, json.dumps(data), datetime.now(UTC))


# -- the address rule ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1", "127.8.9.10", "::1",  # loopback
        "169.254.169.254", "fe80::1",  # link-local (cloud metadata)
        "10.1.2.3", "172.16.0.1", "172.31.255.254", "192.168.1.1", "fc00::1", "fd12:3456::1",
        "0.0.0.0", "::",  # unspecified
        "224.0.0.1", "239.255.255.250", "ff02::1",  # multicast
        "::ffff:127.0.0.1", "::ffff:10.0.0.1",  # IPv4-mapped
        "100.64.0.1",  # shared address space (carrier NAT): not globally routable
    ],
)  # fmt: skip
def test_non_public_addresses_are_refused(address: str) -> None:
    assert forbidden_reason(address) is not None


@pytest.mark.parametrize("address", [PUBLIC, "8.8.8.8", "172.32.0.1", "2606:4700:4700::1111"])
def test_public_addresses_are_allowed(address: str) -> None:
    assert forbidden_reason(address) is None


def test_origins_are_normalized_and_nothing_but_origins() -> None:
    assert origin_of("HTTPS://Agent.Example.COM:443/api?x=1") == "https://agent.example.com"
    assert origin_of("http://agent.example.com:8080/") == "http://agent.example.com:8080"
    assert origin_of("http://[::1]:80") == "http://[::1]"
    assert allowed_origin("https://agent.example.com/") == "https://agent.example.com"
    for bad in ("https://agent.example.com/path", "ftp://x", "https://u:p@agent.example.com"):
        with pytest.raises(InvalidCallbackError):
            allowed_origin(bad)


async def test_loopback_and_private_callbacks_are_refused_by_default(
    make_relay: Callable[..., Any], agent: Agent
) -> None:
    dns = Dns()
    dns.answers["localhost"] = [["127.0.0.1", "::1"]]
    dns.answers["mixed.example"] = [[PUBLIC, "10.0.0.7"]]  # one bad answer is enough
    relay = await make_relay(dns)
    urls = [
        f"http://127.0.0.1:{agent.port}",
        f"http://localhost:{agent.port}",
        "http://169.254.169.254",
        "http://10.0.0.1",
        "http://[::1]:8080",
        "http://mixed.example",
    ]
    token = relay.agents.add("one", "agent:one", urls)
    for url in urls:
        answer = await provision(relay, token, url)
        assert answer.status_code == 403, url
        assert answer.json()["error"] == "forbidden"
        assert "--allow-private-callbacks" in answer.json()["detail"]
    assert "loopback" in (await provision(relay, token, urls[0])).json()["detail"]
    assert "link-local" in (await provision(relay, token, urls[2])).json()["detail"]
    assert "private" in (await provision(relay, token, urls[3])).json()["detail"]
    unknown = "http://nowhere.example"
    relay.agents.allow_origins("one", [unknown])
    assert (await provision(relay, token, unknown)).status_code == 422  # does not resolve
    assert agent.requests == []


async def test_the_operator_allows_private_callbacks_by_environment(
    make_relay: Callable[..., Any], agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ALLOW_PRIVATE_ENV, "1")
    relay = await make_relay()
    url = f"http://127.0.0.1:{agent.port}"
    token = relay.agents.add("one", "agent:one", [url])
    assert (await provision(relay, token, url)).status_code == 200
    assert relay.relay.guard.allow_private


async def test_a_callback_outside_the_agents_origins_is_refused(
    make_relay: Callable[..., Any],
) -> None:
    dns = Dns()
    dns.answers["agent.example"] = dns.answers["evil.example"] = [[PUBLIC]]
    relay = await make_relay(dns)
    token = relay.agents.add("one", "agent:one", ["https://agent.example"])
    inside = await provision(relay, token, "https://Agent.example:443/hooks")
    assert inside.status_code == 200
    for outside in ("https://evil.example", "http://agent.example", "https://agent.example:8443"):
        answer = await provision(relay, token, outside)
        assert answer.status_code == 403, outside
        assert answer.json()["error"] == "forbidden"
        assert "is not allowed for agent 'one'" in answer.json()["detail"]
    async with client(relay, token) as api:
        (arm,) = (await api.get("/list")).json()["arms"]
    assert arm["callback_url"] == "https://Agent.example:443/hooks"


async def test_an_agent_from_before_origins_is_refused_until_an_operator_allows_one(
    make_relay: Callable[..., Any],
) -> None:
    dns = Dns()
    dns.answers["agent.example"] = [[PUBLIC]]
    relay = await make_relay(dns)
    token = relay.agents.add("old", "agent:old")
    # agents.json as an older relay wrote it: no "origins" at all.
    stored = json.loads(relay.agents.path.read_text())
    del stored["agents"]["old"]["origins"]
    relay.agents.path.write_text(json.dumps(stored))
    answer = await provision(relay, token, "https://agent.example")
    assert answer.status_code == 403
    assert "agentcron relay allow-origin old https://agent.example" in answer.json()["detail"]
    # the CLI, on the running relay's home: counts at once
    home = str(relay.agents.home)
    result = CliRunner().invoke(
        main, ["relay", "allow-origin", "old", "https://agent.example", "--home", home]
    )
    assert result.exit_code == 0, result.output
    assert "https://agent.example" in result.output
    assert (await provision(relay, token, "https://agent.example")).status_code == 200


# -- at delivery -----------------------------------------------------------------------------


async def test_delivery_refuses_a_host_that_now_resolves_to_loopback(
    make_relay: Callable[..., Any], agent: Agent
) -> None:
    dns = Dns()
    url = f"http://agent.example:{agent.port}"
    dns.answers["agent.example"] = [[PUBLIC]]
    relay = await make_relay(dns)
    token = relay.agents.add("one", "agent:one", [url])
    assert (await provision(relay, token, url)).status_code == 200
    dns.answers["agent.example"] = [["127.0.0.1"]]  # the DNS answer changed since
    outcome = await relay.relay.deliver(trigger_of(relay, {"callback_url": url}))
    assert outcome.status is OutcomeStatus.FAILED
    assert "refused" in (outcome.error or "")
    assert "loopback" in (outcome.error or "")
    assert agent.requests == []
    assert relay.relay.deliveries["refused"] == 1


async def test_delivery_connects_only_to_the_addresses_it_checked(
    make_relay: Callable[..., Any], agent: Agent
) -> None:
    """A rebinding answer between the check and the connect is caught by the connection."""
    dns = Dns()
    url = f"http://agent.example:{agent.port}"
    # the check before the attempt sees a public address, the connection's own lookup loopback
    dns.answers["agent.example"] = [[PUBLIC], ["127.0.0.1"]]
    relay = await make_relay(dns)
    relay.agents.add("one", "agent:one", [url])
    outcome = await relay.relay.deliver(trigger_of(relay, {"callback_url": url}))
    assert outcome.status is OutcomeStatus.FAILED
    assert "loopback" in (outcome.error or "")
    assert dns.calls == ["agent.example", "agent.example"]
    assert agent.requests == []


async def test_delivery_with_private_callbacks_allowed_reaches_the_checked_address(
    make_relay: Callable[..., Any], agent: Agent
) -> None:
    dns = Dns()
    url = f"http://agent.example:{agent.port}"
    dns.answers["agent.example"] = [["127.0.0.1"]]
    relay = await make_relay(dns, allow_private=True)
    relay.agents.add("one", "agent:one", [url])
    outcome = await relay.relay.deliver(trigger_of(relay, {"callback_url": url}))
    assert outcome.status is OutcomeStatus.SUCCEEDED, outcome.error
    (request,) = agent.requests
    assert request["line"] == "POST /api/cron/fire HTTP/1.1"
    assert request["host"] == f"agent.example:{agent.port}"  # the name, at the checked address
    assert json.loads(request["body"]) == {"job_id": "j", "fire_at": FAR}


async def test_delivery_refuses_an_origin_revoked_since_provisioning(
    make_relay: Callable[..., Any], agent: Agent, tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{agent.port}"
    relay = await make_relay(allow_private=True)
    token = relay.agents.add("one", "agent:one", [url])
    assert (await provision(relay, token, url)).status_code == 200
    # another process (the CLI) revokes it; the running relay reads the file again
    AgentRegistry(relay.agents.home).allow_origins("one", [url], revoke=True)
    outcome = await relay.relay.deliver(trigger_of(relay, {"callback_url": url}))
    assert outcome.status is OutcomeStatus.FAILED
    assert "agent 'one' has no allowed callback origin yet" in (outcome.error or "")
    assert agent.requests == []


def test_the_cli_keeps_origins_with_the_agent(tmp_path: Path) -> None:
    home = str(tmp_path / "relay")
    run = CliRunner().invoke
    added = run(
        main,
        ["relay", "add-agent", "one", "--audience", "agent:one", "--home", home,
         "--allow-origin", "https://a.example/", "--allow-origin", "HTTPS://B.example:443"],
    )  # fmt: skip
    assert added.exit_code == 0, added.output
    assert "https://a.example, https://b.example" in added.output
    listed = run(main, ["relay", "agents", "--home", home])
    assert listed.output.split() == ["one", "agent:one", "https://a.example", "https://b.example"]
    # re-keying keeps them; a revoke takes one out; a path is no origin
    rekeyed = run(main, ["relay", "add-agent", "one", "--audience", "agent:one", "--home", home])
    assert rekeyed.exit_code == 0, rekeyed.output
    assert "https://a.example, https://b.example" in rekeyed.output
    revoked = run(main, ["relay", "allow-origin", "one", "https://b.example", "--revoke",
                         "--home", home])  # fmt: skip
    assert revoked.exit_code == 0, revoked.output
    stored = AgentRegistry(Path(home)).get("one")
    assert stored is not None
    assert stored.origins == {"https://a.example"}
    bad = run(main, ["relay", "allow-origin", "one", "https://a.example/x", "--home", home])
    assert bad.exit_code == 2
    nobody = run(main, ["relay", "allow-origin", "nobody", "https://a.example", "--home", home])
    assert nobody.exit_code == 2
