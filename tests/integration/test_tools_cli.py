"""`agentcron tools list`: every tool the agent has, from the configuration file (an entry
point and a real stdio MCP server, started to list its tools), and clear errors.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pydantic_ai.mcp  # noqa: F401  (its ~1.5 s import is paid at collection, not by a test)
import pytest
from typer.testing import CliRunner, Result

from agentcron.cli import app

SERVER = str(Path(__file__).with_name("mcp_server.py"))
CONFIG = f"""
[server]
port = 9000

[tools]
python = ["tests.integration.tool_module:WEATHER"]

[tools.mcp.calc]
command = {sys.executable!r}
args = [{SERVER!r}]

[tools.policy]
"calc_*" = "approve"
calc_shout = "deny"

[tools.approval_timeout]
calc_add = 90

[tools.sessions]
"telegram:*" = ["cron", "calc_add"]
"""


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTCRON_CONFIG", raising=False)
    monkeypatch.delenv("AGENTCRON_TOOLS_FILE", raising=False)


def cli(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def test_tools_list_shows_every_tool_with_its_source_policy_and_sessions(tmp_path: Path) -> None:
    path = tmp_path / "agentcron.toml"
    path.write_text(CONFIG)
    result = cli("--config", str(path), "tools", "list", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["config"] == str(path)
    rows = {r["name"]: r for r in data["tools"]}
    assert list(rows) == [
        "cron", "schedule_recall", "manage_recall", "forecast", "wipe", "calc_add", "calc_shout",
    ]  # fmt: skip
    assert rows["cron"] | {"description": ""} == {
        "name": "cron",
        "source": "agentcron",
        "policy": "allow",
        "approval_timeout_s": None,
        "sessions": ["telegram:*", "others"],
        "description": "",
    }
    assert (rows["forecast"]["source"], rows["forecast"]["policy"]) == (
        "python tests.integration.tool_module:WEATHER",
        "allow",
    )
    assert rows["forecast"]["sessions"] == ["others"]
    # its own rule and timeout (a UserTool's)
    assert (rows["wipe"]["policy"], rows["wipe"]["approval_timeout_s"]) == ("approve", 120.0)
    add = rows["calc_add"]
    assert (add["source"], add["policy"], add["approval_timeout_s"]) == (
        "mcp calc",
        "approve",
        90.0,
    )
    assert add["sessions"] == ["telegram:*", "others"]
    assert add["description"] == "Add two whole numbers."
    assert (rows["calc_shout"]["policy"], rows["calc_shout"]["approval_timeout_s"]) == (
        "deny",
        None,
    )
    # The same file named by --tools (or $AGENTCRON_TOOLS_FILE) instead, as a table.
    table = cli("tools", "list", "--tools", str(path))
    assert table.exit_code == 0, table.output
    lines = table.output.splitlines()
    assert lines[0].split() == ["NAME", "SOURCE", "POLICY", "TIMEOUT", "SESSIONS", "DESCRIPTION"]
    (add_line,) = [line for line in lines if line.startswith("calc_add ")]
    assert add_line.split()[:7] == [
        "calc_add",
        "mcp",
        "calc",
        "approve",
        "90s",
        "telegram:*,",
        "others",
    ]


def test_without_configured_tools_it_lists_the_scheduling_tools() -> None:
    result = cli("tools", "list", "--json")
    assert result.exit_code == 0, result.output
    names = [r["name"] for r in json.loads(result.output)["tools"]]
    assert names == ["cron", "schedule_recall", "manage_recall"]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("no_such_module_xyz:f", "module 'no_such_module_xyz' not found"),
        (
            "tests.integration.tool_module:nope",
            "module 'tests.integration.tool_module' has no attribute 'nope'",
        ),
        ("tests.integration.tool_module:NOT_A_TOOL", "'NOT_A_TOOL' is not callable (int)"),
    ],
)
def test_a_bad_entry_point_is_one_clear_line(tmp_path: Path, entry: str, message: str) -> None:
    path = tmp_path / "tools.toml"
    path.write_text(f'[tools]\npython = ["{entry}"]\n')
    result = CliRunner().invoke(app, ["tools", "list"], env={"AGENTCRON_TOOLS_FILE": str(path)})
    assert result.exit_code == 2
    assert result.output.strip() == f"error: tool entry point {entry}: {message}" or (
        message in result.output and len(result.output.strip().splitlines()) == 1
    )


def test_a_bad_key_or_a_server_that_does_not_start_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "tools.toml"
    path.write_text("[tools.mcp.calc]\ncommand = 'x'\nagrs = []\n")
    result = cli("tools", "list", "--tools", str(path))
    assert result.exit_code == 2
    assert f"{path}: unknown key 'agrs' in [tools.mcp.calc]" in result.output
    path.write_text(
        f"[tools.mcp.calc]\ncommand = {sys.executable!r}\nargs = [{SERVER!r}, '--exit']\n"
    )
    result = cli("tools", "list", "--tools", str(path))
    assert result.exit_code == 2
    assert "MCP server 'calc'" in result.output
    assert "did not start" in result.output
