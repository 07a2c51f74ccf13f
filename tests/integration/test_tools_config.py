"""Tools from configuration on the built-in agent: an entry point and real MCP servers (stdio
and streamable HTTP, the `mcp` SDK's server in tests/integration/mcp_server.py) called by the
offline model from a sentence, through the gate's policies, approvals and allow-lists.
"""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psutil
import pydantic_ai.mcp  # noqa: F401  (its ~1.5 s import is paid at collection, not by a test)
import pytest

from agentcron.agent.offline import OfflineModel
from agentcron.app import AgentCron
from agentcron.config.tools import ToolConfig, ToolConfigError, load
from agentcron.domain.approvals import ApprovalState
from agentcron.domain.states import RunState, TurnState
from agentcron.server.serve import ServeOptions, build
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import CronFactory
from tests.integration import tool_module

SERVER = str(Path(__file__).with_name("mcp_server.py"))
KEY = "websocket:chat-1"


@pytest.fixture(autouse=True)
def _clear() -> None:
    tool_module.calls.clear()


def stdio(log: Path, **extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [SERVER], "env": {"MCP_TEST_LOG": str(log)}} | extra


async def offline(make_cron: CronFactory, table: dict[str, Any], **kw: Any) -> AgentCron:
    return await make_cron(
        runner=None, model=OfflineModel(0), tool_config=ToolConfig.parse(table), **kw
    )


async def turn(cron: AgentCron, text: str, key: str = KEY) -> tuple[str, list[Any]]:
    """Say `text` in `key`; the reply and the turn's tool entries once it ended."""
    started = await cron.sessions.send(key, text)
    await wait_settled(cron.engine)
    for _ in range(400):  # an MCP call runs in real time
        done = await cron.sessions.turn(started.id)
        if done.state is not TurnState.RUNNING and done.state is not TurnState.QUEUED:
            break
        await asyncio.sleep(0.01)
        await wait_settled(cron.engine)
    assert done.state is TurnState.SUCCEEDED, done.error
    messages = await cron.sessions.messages(key)
    calls = [m for m in messages if m.role == "tool" and m.meta.get("turn_id") == started.id]
    reply = next(m for m in messages if m.id == done.reply_message_id)
    return reply.content, calls


async def pending(cron: AgentCron) -> Any:
    for _ in range(1000):
        found = await cron.approvals.list(KEY)
        if found:
            return found[0]
        await asyncio.sleep(0.005)
    raise AssertionError("no approval was requested")


async def test_an_entry_point_tool_is_called_from_a_sentence(make_cron: CronFactory) -> None:
    cron = await offline(make_cron, {"python": ["tests.integration.tool_module:lookup"]})
    reply, (call,) = await turn(cron, "use lookup with q=tide")
    assert tool_module.calls == [{"lookup": "tide"}]
    assert reply == "(offline model) Done: found tide"
    assert (call.meta["name"], call.meta["ok"], call.content) == ("lookup", True, "found tide")


async def test_an_entry_point_list_brings_its_tools_and_their_approval_rules(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    cron = await offline(
        make_cron,
        {"python": ["tests.integration.tool_module:WEATHER"], "approval_timeout": {"wipe": 30}},
    )
    _, (call,) = await turn(cron, "use forecast with city=Oslo")
    assert call.content == "sunny in Oslo"
    waiting = asyncio.create_task(turn(cron, "use wipe with path=/tmp"))  # requires approval
    approval = await pending(cron)
    assert approval.expires_at - approval.requested_at == timedelta(seconds=30)  # the file's
    clock.advance(timedelta(seconds=30))  # no decision in time: it times out
    _, (call,) = await waiting
    assert call.content == "Denied: timed out waiting for a person's approval."
    assert tool_module.calls == [{"forecast": "Oslo"}]


async def test_a_stdio_mcp_tool_needs_approval_and_runs_in_the_server(
    make_cron: CronFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "mcp.log"
    monkeypatch.setenv("CALC_LOG", str(log))  # ${CALC_LOG}: from the environment, not the file
    cron = await offline(
        make_cron,
        {
            "mcp": {"calc": stdio(log) | {"env": {"MCP_TEST_LOG": "${CALC_LOG}"}}},
            "policy": {"calc_add": "approve", "calc_sh*": "deny"},
        },
    )
    assert cron.tool_servers is not None
    assert {"calc_add", "calc_shout", "cron"} <= set(cron.tool_servers.names)
    started = asyncio.create_task(turn(cron, "use calc_add with a=2, b=3"))
    approval = await pending(cron)
    assert (approval.tool, approval.args) == ("calc_add", {"a": 2, "b": 3})
    assert not log.exists()  # nothing ran before the decision
    await cron.approvals.decide(approval.id, "approve", by="ana")
    reply, (call,) = await started
    assert reply == "(offline model) Done: 5"
    assert (call.meta["name"], call.meta["ok"], call.content) == ("calc_add", True, "5")
    assert log.read_text().splitlines() == ["add 2 3"]
    assert (await cron.approvals.get(approval.id)).state is ApprovalState.APPROVED
    _, (denied,) = await turn(cron, "use calc_shout with text=hi")
    assert denied.content.startswith("Denied by policy")
    assert log.read_text().splitlines() == ["add 2 3"]


async def test_a_session_allow_list_hides_the_other_tools(
    make_cron: CronFactory, tmp_path: Path
) -> None:
    log = tmp_path / "mcp.log"
    cron = await offline(
        make_cron,
        {
            "python": ["tests.integration.tool_module:lookup"],
            "mcp": {"calc": stdio(log)},
            "sessions": {"api:*": ["cron", "calc_*"], "api:strict": ["cron"]},
        },
    )
    # Outside its list: not offered, so the offline model cannot call it.
    reply, calls = await turn(cron, "use lookup with q=x", key="api:one")
    assert calls == []
    assert reply.startswith('(offline model) You said: "use lookup with q=x"')
    reply, calls = await turn(cron, "use calc_shout with text=hi", key="api:strict")
    assert calls == []
    assert not log.exists()
    # On the list (a glob), and sessions no pattern names may use every tool.
    _, (call,) = await turn(cron, "use calc_shout with text=hi", key="api:one")
    assert call.content == "HI"
    _, (call,) = await turn(cron, "use lookup with q=y")
    assert call.content == "found y"
    assert tool_module.calls == [{"lookup": "y"}]


async def test_a_scheduled_turn_is_not_offered_a_tool_its_session_may_not_use(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    cron = await offline(
        make_cron,
        {
            "python": ["tests.integration.tool_module:lookup"],
            "sessions": {"api:strict": ["cron"], "api:open": ["cron", "lookup"]},
        },
    )
    jobs = {}
    for key in ("api:strict", "api:open"):
        await cron.sessions.create(key)
        jobs[key] = await cron.jobs.create(
            name="look", when="in 1m", message="use lookup with q=tide", session_key=key
        )
    clock.advance(timedelta(minutes=1))
    await wait_settled(cron.engine)
    runs = {}
    for key, job in jobs.items():
        (run,) = await cron.runs.list(job.id)
        runs[key] = await cron.runs.wait(run.id, 2)
        assert runs[key].state is RunState.SUCCEEDED, runs[key].error
    # outside its session's list: not offered, so the scheduled turn could not call it
    assert runs["api:strict"].tool_calls is None
    assert runs["api:strict"].output == "(offline model) Reminder: use lookup with q=tide."
    # on its list: the same job's turn calls it
    assert runs["api:open"].tool_calls is not None
    assert [c["name"] for c in runs["api:open"].tool_calls] == ["lookup"]
    assert tool_module.calls == [{"lookup": "tide"}]


SEEN_HEADERS: list[dict[bytes, bytes]] = []


@pytest.fixture
async def http_server(tmp_path: Path) -> AsyncIterator[str]:
    """The test MCP server's streamable-HTTP app under uvicorn, in this process (each HTTP
    request's headers kept in SEEN_HEADERS).
    """
    import uvicorn

    from tests.integration.mcp_server import server

    inner = server.streamable_http_app()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            SEEN_HEADERS.append(dict(scope["headers"]))
        await inner(scope, receive, send)

    SEEN_HEADERS.clear()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    web = uvicorn.Server(config)
    task = asyncio.create_task(web.serve())
    for _ in range(500):
        if web.started:
            break
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        web.should_exit = True
        await task


async def test_a_streamable_http_mcp_tool_is_called(
    make_cron: CronFactory, http_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WEB_TOKEN", "s3cret")
    headers = {"Authorization": "Bearer ${WEB_TOKEN}", "X-Team": "${WEB_TEAM:-ops}"}
    cron = await offline(make_cron, {"mcp": {"web": {"url": http_server, "headers": headers}}})
    reply, (call,) = await turn(cron, "use web_shout with text=quiet")
    assert (call.meta["name"], call.content) == ("web_shout", "QUIET")
    assert reply == "(offline model) Done: QUIET"
    assert SEEN_HEADERS
    for seen in SEEN_HEADERS:  # every request of the session carried them, expanded
        assert (seen[b"authorization"], seen[b"x-team"]) == (b"Bearer s3cret", b"ops")


async def test_a_server_that_does_not_start_fails_the_start(
    make_cron: CronFactory, tmp_path: Path
) -> None:
    table = {"mcp": {"broken": {"command": sys.executable, "args": [SERVER, "--exit"]}}}
    with pytest.raises(
        ToolConfigError, match=r"MCP server 'broken' \(.*mcp_server.py --exit\) did not start"
    ):
        await offline(make_cron, table)
    missing = {"mcp": {"gone": {"command": str(tmp_path / "no-such-server")}}}
    with pytest.raises(ToolConfigError, match=r"MCP server 'gone'.*did not start.*No such file"):
        await offline(make_cron, missing)


async def test_two_tools_with_one_name_are_a_clear_error(
    make_cron: CronFactory, tmp_path: Path
) -> None:
    table = {
        "python": ["tests.integration.tool_module:calc_add"],
        "mcp": {"calc": stdio(tmp_path / "log")},
    }
    with pytest.raises(ToolConfigError, match=r"two tools are named 'calc_add'.*mcp calc"):
        await offline(make_cron, table)
    with pytest.raises(ToolConfigError, match="two tools are named 'lookup'"):
        await offline(
            make_cron,
            {"python": ["tests.integration.tool_module:lookup"]},
            tools=[tool_module.lookup],
        )


async def test_serve_reads_the_tools_of_its_file(tmp_path: Path) -> None:
    path = tmp_path / "agentcron.toml"
    path.write_text(
        '[server]\nport = 9000\n\n[tools]\npython = ["tests.integration.tool_module:lookup"]\n'
        '[tools.policy]\nlookup = "deny"\n'
    )
    server = build(ServeOptions(db=tmp_path / "s.db", home=tmp_path, tools=path))
    async with server.app.router.lifespan_context(server.app):
        assert server.cron.tool_servers is not None
        assert server.cron.tool_servers.names["lookup"] == (
            "python tests.integration.tool_module:lookup"
        )


async def test_a_server_that_does_not_start_stops_serve(tmp_path: Path) -> None:
    """uvicorn's lifespan fails, and `run` raises the error after uvicorn returns."""
    bad = tmp_path / "bad.toml"
    bad.write_text(
        f'[tools.mcp.calc]\ncommand = {sys.executable!r}\nargs = [{SERVER!r}, "--exit"]\n'
    )
    server = build(ServeOptions(db=tmp_path / "s.db", home=tmp_path, tools=bad))
    with pytest.raises(ToolConfigError, match="MCP server 'calc'"):
        async with server.app.router.lifespan_context(server.app):
            pass
    assert [str(e) for e in server.start_errors] == [
        f"MCP server 'calc' ({sys.executable} {SERVER} --exit) did not start: Connection closed"
    ]
    assert not server.cron.running


def mcp_children() -> list[psutil.Process]:
    return [p for p in psutil.Process().children(recursive=True) if SERVER in p.cmdline()]


async def test_the_servers_start_and_stop_with_agentcron(tmp_path: Path) -> None:
    path = tmp_path / "tools.toml"
    path.write_text(
        '[tools]\npython = ["tests.integration.tool_module:calc_add"]\n'
        f'[tools.mcp.calc]\ncommand = {sys.executable!r}\nargs = [{SERVER!r}]\nprefix = "math"\n'
    )  # another prefix: the server's `add` and the entry point's `calc_add` no longer meet
    cron = AgentCron(
        db=tmp_path / "a.db", runner=None, model=OfflineModel(0), tool_config=load(path)
    )
    assert mcp_children() == []  # made, not started
    async with cron:
        (child,) = mcp_children()
        assert child.is_running()
        assert cron.tool_servers is not None
        assert {"calc_add", "math_add"} <= set(cron.tool_servers.names)
        _, (call,) = await turn(cron, "use math_add with a=1, b=1")
        assert call.content == "2"
    assert mcp_children() == []
    assert not child.is_running()


def test_serve_exits_with_the_one_line_error(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    from agentcron.server.serve import run

    bad = tmp_path / "bad.toml"
    bad.write_text(
        f'[tools.mcp.calc]\ncommand = {sys.executable!r}\nargs = [{SERVER!r}, "--exit"]\n'
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    options = ServeOptions(port=port, db=tmp_path / "s.db", home=tmp_path, tools=bad)
    said: list[str] = []
    with pytest.raises(ToolConfigError, match=r"MCP server 'calc'.*did not start"):
        run(options, said.append)
    assert said == []  # it never served
    err = capfd.readouterr().err
    assert "Application startup failed. Exiting." in err  # uvicorn's log reached us
    assert "Traceback" not in err  # but not its traceback of our error
