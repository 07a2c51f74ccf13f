"""The [tools] table: strict parsing, entry points, names, and the rules (policy, approval
timeout, session allow-lists) by name and glob.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from agentcron.agent.gate import UserTool
from agentcron.agent.tool_rules import GlobTable, ToolRules
from agentcron.agent.tool_sources import (
    configured_tools,
    expand_env,
    import_tools,
    merged_policies,
    names_of,
    row,
    tool_rules,
)
from agentcron.config.file import read_config
from agentcron.config.tools import ToolConfig, ToolConfigError, load


def write(tmp_path: Path, text: str, name: str = "agentcron.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, "utf-8")
    return path


FULL = """
[server]
port = 9000

[tools]
python = ["tests.integration.tool_module:lookup", "tests.integration.tool_module:WEATHER"]

[tools.mcp.files]
command = "python"
args = ["-m", "files_server"]
env = { ROOT = "/srv" }

[tools.mcp.search]
url = "https://mcp.example.com/mcp"
headers = { Authorization = "Bearer x" }
prefix = ""

[tools.policy]
lookup = "approve"
"files_*" = "deny"

[tools.approval_timeout]
lookup = 600

[tools.sessions]
"telegram:*" = ["cron", "lookup"]
"""


def test_the_table_of_the_configuration_file_is_read_and_the_settings_skip_it(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, FULL)
    config = load(path)
    table = config.table
    assert table.python[1] == "tests.integration.tool_module:WEATHER"
    assert (table.mcp["files"].command, table.mcp["files"].args) == (
        "python",
        ["-m", "files_server"],
    )
    assert table.mcp["search"].headers == {"Authorization": "Bearer x"}
    assert table.policy == {"lookup": "approve", "files_*": "deny"}
    assert config.source == path
    assert read_config(path) == {"AGENTCRON_PORT": "9000"}  # [tools] is not a flat setting
    rules = tool_rules(config)
    assert rules.approval_timeouts.get("lookup") == timedelta(minutes=10)
    assert rules.allowed("telegram:1", "lookup")
    assert not rules.allowed("telegram:1", "files_rm")


def test_a_file_without_tools_is_an_empty_config(tmp_path: Path) -> None:
    config = load(write(tmp_path, "[server]\nport = 1\n"))
    assert config.empty
    assert configured_tools(config).tools == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[tools]\npythn = []\n", "unknown key 'pythn' in [tools]"),
        ("[tools.mcp.a]\ncommand = 'x'\nhedaers = {}\n", "unknown key 'hedaers' in [tools.mcp.a]"),
        ("[tools.mcp.a]\ncommand = 'x'\nurl = 'http://h/mcp'\n", "tools.mcp.a: give `command`"),
        ("[tools.mcp.a]\nargs = ['x']\n", "give `command` (a stdio server) or `url`"),
        (
            "[tools.mcp.a]\nurl = 'http://h/mcp'\nargs = ['x']\n",
            "`args`, `env` and `cwd` are for a stdio",
        ),
        ("[tools.mcp.a]\ncommand = 'x'\nheaders = {A = 'b'}\n", "`headers` are for an HTTP server"),
        (
            "[tools.mcp.a]\nurl = 'ftp://h/mcp'\n",
            "tools.mcp.a.url: 'ftp://h/mcp' is not valid: a URL starts with http",
        ),
        (
            "[tools.mcp.'bad name']\ncommand = 'x'\n",
            "tools.mcp.bad name: 'bad name' is not valid: a server name is a letter",
        ),
        (
            "[tools.policy]\nx = 'maybe'\n",
            "tools.policy.x: Input should be 'allow', 'approve' or 'deny'",
        ),
        (
            "[tools.approval_timeout]\nx = 0\n",
            "tools.approval_timeout.x: Input should be greater than 0",
        ),
        ("[tools.approval_timeout]\nx = 100000\n", "less than or equal to 86400"),
        (
            "[tools]\npython = ['no_colon']\n",
            "tools.python.0: 'no_colon' is not valid: an entry point is module:attribute",
        ),
        ("[tools]\npython = ['a:b c']\n", "tools.python.0: 'a:b c' is not valid"),
        (
            "[tools.sessions]\n'a b' = ['x']\n",
            "tools.sessions.a b: 'a b' is not valid: a session key or glob",
        ),
        (
            "[tools.sessions]\n'a:*' = ['x y']\n",
            "tools.sessions.a:*.0: 'x y' is not valid: a tool name or glob",
        ),
        ("[tools.sessions]\n'a:*' = 'cron'\n", "tools.sessions.a:*: Input should be a valid list"),
        ("tools = 1\n", "tools must be a table"),
        ("[tool]\npython = []\n", "unknown section [tool]; the tools are in [tools]"),
        ("[tools\n", "is not valid TOML"),
    ],
)
def test_a_bad_table_is_one_clear_error_naming_the_file_and_key(
    tmp_path: Path, text: str, message: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ToolConfigError) as caught:
        load(path)
    assert str(path) in str(caught.value)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"python": ["m:f"] * 65}, "tools.python: List should have at most 64 items"),
        ({"mcp": {f"s{i}": {"url": "http://h/mcp"} for i in range(17)}}, "at most 16 items"),
        ({"mcp": {"a": {"command": "x", "args": ["y"] * 65}}}, "at most 64 items"),
        ({"mcp": {"a": {"command": "x" * 5000}}}, "at most 4096 characters"),
        ({"mcp": {"a": {"url": "http://h/" + "x" * 3000}}}, "at most 2048 characters"),
        ({"policy": {f"t{i}": "allow" for i in range(513)}}, "at most 512 items"),
        ({"sessions": {"a:*": ["t"] * 257}}, "at most 256 items"),
        ({"policy": {"x" * 129: "allow"}}, "is not valid: a tool name or glob"),
    ],
)
def test_every_value_is_bounded(table: dict[str, Any], message: str) -> None:
    with pytest.raises(ToolConfigError) as caught:
        ToolConfig.parse(table)
    assert message in str(caught.value)


def test_a_file_over_a_megabyte_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "# " + "x" * 1_000_001)
    with pytest.raises(ToolConfigError, match="larger than 1 MB"):
        load(path)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("no_such_module_xyz:f", "module 'no_such_module_xyz' not found"),
        ("tests.integration.nope:f", "module 'tests.integration.nope' not found"),
        ("tests.integration.tool_module:nope", "has no attribute 'nope'"),
        ("tests.integration.tool_module:NOT_A_TOOL", "'NOT_A_TOOL' is not callable (int)"),
        ("tests.integration.tool_module:EMPTY", "the list is empty"),
        ("tests.integration.tool_module:UserTool", "'UserTool' is a class; name a function"),
        (
            "tests.integration.broken_tool_module:f",
            "importing 'tests.integration.broken_tool_module' failed: RuntimeError: BROKEN_TOKEN is not set",
        ),
        ("tests.integration.tool_module:WEATHER.x", "has no attribute 'WEATHER.x'"),
    ],
)
def test_a_bad_entry_point_says_what_is_wrong(entry: str, message: str) -> None:
    with pytest.raises(ToolConfigError) as caught:
        import_tools(entry)
    assert str(caught.value).startswith(f"tool entry point {entry}: ")
    assert message in str(caught.value)


def test_an_entry_point_gives_a_function_a_tool_or_a_list() -> None:
    from tests.integration import tool_module

    assert import_tools("tests.integration.tool_module:lookup") == [tool_module.lookup]
    forecast, wipe = import_tools("tests.integration.tool_module:WEATHER")
    assert forecast is tool_module.forecast
    assert isinstance(wipe, UserTool)
    built = configured_tools(
        ToolConfig.parse({"python": ["tests.integration.tool_module:WEATHER"]})
    )
    assert built.sources == {
        "forecast": "python tests.integration.tool_module:WEATHER",
        "wipe": "python tests.integration.tool_module:WEATHER",
    }


def test_two_sources_of_one_name_are_refused() -> None:
    from tests.integration import tool_module

    with pytest.raises(
        ToolConfigError, match="two tools are named 'lookup': from library and from python m:f"
    ):
        names_of([("library", [tool_module.lookup])], {"lookup": "python m:f"})
    twice = {"python": ["tests.integration.tool_module:lookup"] * 2}
    with pytest.raises(ToolConfigError, match="two tools are named 'lookup'"):
        configured_tools(ToolConfig.parse(twice))


def test_an_exact_name_wins_over_a_glob_and_a_longer_glob_over_a_shorter() -> None:
    table = GlobTable(
        {"*": "allow", "files_*": "approve", "files_rm*": "deny", "files_ls": "allow"}
    )
    assert table.get("files_ls") == "allow"  # exact
    assert table.get("files_rmdir") == "deny"  # the longest glob
    assert table.get("files_cp") == "approve"
    assert table.get("cron") == "allow"
    assert GlobTable({"a": 1}).get("b") is None
    assert "files_cp" in table
    assert len(table) == 4
    assert list(table) == ["*", "files_*", "files_rm*", "files_ls"]


def test_session_allow_lists_by_key_and_glob() -> None:
    rules = ToolRules.of(
        sessions={"telegram:*": ["cron", "files_*"], "telegram:42": ["cron"], "api:*": []}
    )
    assert rules.allowed("telegram:1", "files_ls")
    assert not rules.allowed("telegram:1", "lookup")
    assert not rules.allowed("telegram:42", "files_ls")  # its own key wins over the glob
    assert not rules.allowed("api:x", "cron")  # an empty list: no tools at all
    assert rules.allowed("websocket:a", "lookup")  # no pattern names it: every tool
    assert rules.allowed(None, "lookup")  # outside a session (a library runner's own call)
    assert rules.sessions_of("files_ls") == ["telegram:*", "others"]
    assert rules.sessions_of("cron") == ["telegram:*", "telegram:42", "others"]
    assert ToolRules.of(sessions={"*": ["cron"]}).sessions_of("x") == []
    assert ToolRules().sessions_of("x") == ["all"]
    assert ToolRules().allowed("telegram:1", "x")


def test_the_policy_shown_for_a_tool() -> None:
    rules = ToolRules.of(
        policies={"files_*": "approve", "files_ls": "allow"},
        approval_timeouts={"files_*": timedelta(seconds=30)},
    )
    shown = row("files_rm", "mcp files", "", rules)
    assert (shown.policy, shown.approval_timeout_s, shown.sessions) == ("approve", 30.0, ["all"])
    assert row("files_ls", "mcp files", "", rules).approval_timeout_s is None
    assert row("x", "python m:x", "", rules, requires_approval=True).policy == "approve"
    per_call = row("x", "python m:x", "", rules, requires_approval=lambda args: True)
    assert (per_call.policy, per_call.approval_timeout_s) == ("approve (per call)", 300.0)
    assert row("x", "python m:x", "", rules).policy == "allow"
    own = row("x", "m", "", rules, requires_approval=True, own_timeout=timedelta(minutes=1))
    assert own.approval_timeout_s == 60.0
    filed = row("files_x", "m", "", rules, own_timeout=timedelta(minutes=1))
    assert filed.approval_timeout_s == 30.0  # the file's glob first


def test_the_library_tool_policy_wins_over_the_configured_one() -> None:
    rules = ToolRules.of(policies={"files_*": "approve", "cron": "deny"})
    merged = merged_policies(rules, {"cron": "allow"})
    assert (merged.get("cron"), merged.get("files_x")) == ("allow", "approve")


def test_the_documented_example_is_a_valid_table(tmp_path: Path) -> None:
    page = (Path(__file__).parents[3] / "docs" / "agents.md").read_text("utf-8")
    section = page[page.index("### Tools from configuration") :]
    block = section[section.index("```toml\n") + len("```toml\n") : section.index("```\n", 8)]
    config = load(write(tmp_path, block))
    assert list(config.table.mcp) == ["files", "search"]
    rules = tool_rules(config)
    assert rules.policies.get("files_write_file") == "deny"
    assert rules.policies.get("files_read_file") == "approve"
    assert not rules.allowed("webhook:alerts", "cron")
    assert rules.allowed("telegram:1", "check_build")
    assert not rules.allowed("telegram:1", "files_read_file")


def test_environment_references_are_expanded_and_an_unset_one_is_an_error() -> None:
    env = {"TOKEN": "s3cret", "EMPTY": ""}
    assert expand_env("Bearer ${TOKEN}", "h", env) == "Bearer s3cret"
    assert expand_env("${MISSING:-none}/${EMPTY:-x}", "h", env) == "none/"
    assert expand_env("no refs, $TOKEN stays", "h", env) == "no refs, $TOKEN stays"
    with pytest.raises(ToolConfigError, match=r"^tools.mcp.a.env.K: \$\{MISSING\} is not set"):
        expand_env("${MISSING}", "tools.mcp.a.env.K", env)


def test_the_gate_takes_a_timeout_from_the_file_first_then_the_tools_own() -> None:
    from pydantic_ai import Tool

    from agentcron.agent.gate import build_toolset

    def pay(amount: int) -> str:
        return "paid"

    def wire(amount: int) -> str:
        return "wired"

    hour, half = timedelta(hours=1), timedelta(seconds=30)
    own = [UserTool(pay, approval_timeout=hour), UserTool(Tool(wire), approval_timeout=hour)]
    gated = build_toolset(own, timeouts=GlobTable({"wi*": half}))
    assert (gated.timeouts.get("pay"), gated.timeouts.get("wire")) == (hour, half)
    assert gated.timeouts.get("other") is None
    assert dict(gated.timeouts) == {"wi*": half, "pay": hour}  # "wire" is under the glob
    with pytest.raises(ValueError, match="approval timeout of x must be positive"):
        build_toolset([], timeouts=GlobTable({"x": timedelta(0)}))
