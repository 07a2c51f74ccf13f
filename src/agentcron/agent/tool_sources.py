"""The agent's tool sources from configuration: Python entry points imported, MCP servers made,
started and stopped (`ToolServers`, with `AgentCron.start` and `close`), and the inventory
`agentcron tools list` shows.

The `[tools]` table itself (`ToolConfig`) is parsed and checked in `agentcron.config.tools`.
MCP servers are reached through pydantic-ai's MCP client (`pydantic_ai.mcp.MCPToolset`, on the
FastMCP client); a server that does not start fails the start with a `ToolConfigError`.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
import tempfile
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TextIO, cast

from pydantic_ai import Tool

from agentcron.agent.gate import ToolLike, UserTool
from agentcron.agent.tool_rules import GlobTable, ToolRules
from agentcron.config.env import or_environ
from agentcron.config.tools import MAX_TOOLS, McpServerConfig, ToolConfig, ToolConfigError
from agentcron.domain.approvals import DEFAULT_APPROVAL_TIMEOUT, Policy

if TYPE_CHECKING:
    from fastmcp.client.transports import StdioTransport
    from pydantic_ai.mcp import MCPToolset
    from pydantic_ai.toolsets import AbstractToolset

__all__ = [
    "ConfiguredTools",
    "McpServer",
    "ToolRow",
    "ToolServers",
    "configured_tools",
    "expand_env",
    "import_tools",
    "inventory",
    "merged_policies",
    "names_of",
    "tool_name",
    "tool_rules",
]

_MAX_TOOLS_PER_ENTRY = 256


def tool_rules(config: ToolConfig) -> ToolRules:
    """The table's policies, approval timeouts and session allow-lists."""
    t = config.table
    return ToolRules.of(
        t.policy,
        {name: timedelta(seconds=s) for name, s in t.approval_timeout.items()},
        t.sessions,
    )


def configured_tools(config: ToolConfig) -> ConfiguredTools:
    """Import the table's entry points and make (not start) its MCP servers' toolsets."""
    tools: list[ToolLike] = []
    sources: dict[str, str] = {}
    for entry in config.table.python:
        for item in import_tools(entry):
            name = tool_name(item)
            _claim(sources, name, f"python {entry}")
            tools.append(item)
    servers = [McpServer(name, server, config.environ) for name, server in config.table.mcp.items()]
    return ConfiguredTools(tools, sources, servers, tool_rules(config))


# -- entry points -------------------------------------------------------------------------


def tool_name(item: ToolLike) -> str:
    """The name the model sees for a library tool."""
    if isinstance(item, UserTool):
        item = item.tool
    if isinstance(item, Tool):
        return item.name
    return str(getattr(item, "__name__", repr(item)))


def _is_tool(value: object) -> bool:
    return isinstance(value, Tool | UserTool) or (callable(value) and not isinstance(value, type))


def import_tools(entry: str) -> list[ToolLike]:
    """The tools `module:attr` names: a function, a Tool, a UserTool, or a list of them."""
    module_name, _, attr = entry.partition(":")
    # Like uvicorn's app dir: a module beside the service (its working directory) imports too,
    # after the installed ones (appended, so a local file never shadows a package).
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.append(here)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise ToolConfigError(
                f"tool entry point {entry}: module {module_name!r} not found (in the working "
                f"directory {here}, $PYTHONPATH or the installed packages)"
            ) from None
        raise ToolConfigError(
            f"tool entry point {entry}: importing {module_name!r} failed: {exc}"
        ) from None
    except Exception as exc:
        raise ToolConfigError(
            f"tool entry point {entry}: importing {module_name!r} failed: "
            f"{type(exc).__name__}: {exc}"
        ) from None
    value: Any = module
    for part in attr.split("."):
        if not hasattr(value, part):
            raise ToolConfigError(
                f"tool entry point {entry}: module {module_name!r} has no attribute {attr!r}"
            )
        value = getattr(value, part)
    if isinstance(value, list | tuple):
        if not value:
            raise ToolConfigError(f"tool entry point {entry}: the list is empty")
        if len(value) > _MAX_TOOLS_PER_ENTRY:
            raise ToolConfigError(
                f"tool entry point {entry}: more than {_MAX_TOOLS_PER_ENTRY} tools"
            )
        for i, item in enumerate(value):
            if not _is_tool(item):
                raise ToolConfigError(
                    f"tool entry point {entry}: item {i} ({type(item).__name__}) is not a tool "
                    "(a function, a pydantic_ai.Tool or an agentcron UserTool)"
                )
        return list(value)
    if not _is_tool(value):
        what = "a class" if isinstance(value, type) else f"not callable ({type(value).__name__})"
        raise ToolConfigError(
            f"tool entry point {entry}: {attr!r} is {what}; "
            "name a function, a pydantic_ai.Tool, an agentcron UserTool or a list of them"
        )
    return [value]


def _claim(sources: dict[str, str], name: str, source: str) -> None:
    """Record that `source` gives the tool `name`; two sources of one name are an error."""
    if name in sources:
        raise ToolConfigError(
            f"two tools are named {name!r}: from {sources[name]} and from {source} "
            "(rename one; an MCP server's tools can take another prefix)"
        )
    if len(sources) >= MAX_TOOLS:
        raise ToolConfigError(f"more than {MAX_TOOLS} tools")
    sources[name] = source


def names_of(
    groups: Sequence[tuple[str, Sequence[ToolLike]]], configured: Mapping[str, str]
) -> dict[str, str]:
    """Every function tool's name and source: `groups` of (source, tools) first, then the
    configured entry points' (`configured`); ToolConfigError when two share a name.
    """
    names: dict[str, str] = {}
    for source, items in groups:
        for item in items:
            _claim(names, tool_name(item), source)
    for name, source in configured.items():
        _claim(names, name, source)
    return names


# -- MCP servers --------------------------------------------------------------------------


_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand_env(value: str, where: str, environ: Mapping[str, str] | None = None) -> str:
    """`${NAME}` / `${NAME:-default}` in a server's args, env, url or headers, from `environ`
    (the settings' values; None = the process environment; secrets stay out of the file); an
    unset NAME without a default is an error.
    """
    env = or_environ(environ)

    def one(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in env:
            return env[name]
        if default is not None:
            return default
        raise ToolConfigError(f"{where}: ${{{name}}} is not set in the environment")

    return _ENV_REF.sub(one, value)


class McpServer:
    """One configured MCP server and its pydantic-ai toolset (prefixed), not yet started."""

    def __init__(
        self, name: str, config: McpServerConfig, environ: Mapping[str, str] | None = None
    ) -> None:
        from pydantic_ai.mcp import MCPToolset

        self.name = name
        self.config = config
        self.prefix = name if config.prefix is None else config.prefix
        self._stdio: StdioTransport | None = None
        self._log: TextIO | None = None  # where a quiet stdio server's stderr goes
        where = f"tools.mcp.{name}"
        if config.command is not None:
            from fastmcp.client.transports import StdioTransport

            env = {k: expand_env(v, f"{where}.env.{k}", environ) for k, v in config.env.items()}
            # keep_alive=False: leaving the toolset ends the subprocess (no orphan server).
            self._stdio = StdioTransport(
                config.command,
                [expand_env(arg, f"{where}.args", environ) for arg in config.args],
                env=env or None,
                cwd=config.cwd,
                keep_alive=False,
            )
            self.toolset: MCPToolset[Any] = MCPToolset(
                self._stdio, id=name, init_timeout=config.timeout
            )
        else:
            headers = {
                k: expand_env(v, f"{where}.headers.{k}", environ) for k, v in config.headers.items()
            }
            self.toolset = MCPToolset(
                expand_env(config.url or "", f"{where}.url", environ),
                id=name,
                init_timeout=config.timeout,
                headers=headers or None,
            )
        self.exposed: AbstractToolset[Any] = (
            self.toolset.prefixed(self.prefix) if self.prefix else self.toolset
        )

    @property
    def source(self) -> str:
        return f"mcp {self.name}"

    def tool_name(self, name: str) -> str:
        return f"{self.prefix}_{name}" if self.prefix else name

    def open_log(self, quiet: bool) -> None:
        """Before a start: a stdio server's stderr goes to ours, or (`quiet`, or ours is no
        real file) to a temporary file whose last line an error quotes.
        """
        if self._stdio is None:
            return
        if not quiet:
            try:
                sys.stderr.fileno()
            except (AttributeError, OSError, ValueError):
                quiet = True
        if quiet and self._log is None:
            # Closed by close_log (ToolServers.stop, or a failed start): it outlives this call.
            self._log = cast(
                TextIO,
                tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace"),  # noqa: SIM115
            )
        self._stdio.log_file = self._log if quiet else None

    def last_error_line(self) -> str:
        """The last line the server wrote to its (captured) stderr, if any."""
        if self._log is None:
            return ""
        self._log.flush()
        self._log.seek(0)
        lines = [line.strip() for line in self._log.read()[-4000:].splitlines() if line.strip()]
        return lines[-1][:300] if lines else ""

    def close_log(self) -> None:
        log, self._log = self._log, None
        if log is not None:
            log.close()

    async def tools(self) -> list[tuple[str, str]]:
        """(name as the model sees it, description) of each tool (the server must be started)."""
        listed = await self.toolset.list_tools()
        return [(self.tool_name(t.name), t.description or "") for t in listed]


@dataclass
class ConfiguredTools:
    """What a ToolConfig gives AgentCron: function tools, MCP servers, rules."""

    tools: list[ToolLike] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)  # function tool name -> source
    servers: list[McpServer] = field(default_factory=list)
    rules: ToolRules = field(default_factory=ToolRules)

    @property
    def toolsets(self) -> list[AbstractToolset[Any]]:
        return [server.exposed for server in self.servers]


class ToolServers:
    """Starts the MCP servers together (at `AgentCron.start`) and stops them (at `close`).

    A stdio server's stderr is this process's (the service log), or with `quiet` (what
    `tools list` uses) a temporary file, whose last line a failed start quotes.
    """

    def __init__(self, servers: Sequence[McpServer] = (), *, quiet: bool = False) -> None:
        self.servers = list(servers)
        self.quiet = quiet
        self._stack: AsyncExitStack | None = None
        self.names: dict[str, str] = {}  # every tool name -> its source, once started

    async def start(self, known: Mapping[str, str]) -> None:
        """Start every server and list its tools; `known` are the other tools' names and
        sources (a name two tools share is an error). On any failure the servers started so
        far are stopped and ToolConfigError says which one failed and why.
        """
        if self._stack is not None:
            return  # started already
        if not self.servers:
            self.names = dict(known)
            return
        names = dict(known)
        stack = AsyncExitStack()
        try:
            for server in self.servers:
                server.open_log(self.quiet)
                stack.callback(server.close_log)
                try:
                    await stack.enter_async_context(server.toolset)
                    listed = await server.tools()
                except Exception as exc:
                    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                    said = server.last_error_line()
                    raise ToolConfigError(
                        f"MCP server {server.name!r} ({server.config.describe()}) did not "
                        f"start: {first[:500]}" + (f" (its last words: {said})" if said else "")
                    ) from exc
                for name, _ in listed:
                    _claim(names, name, server.source)
        except BaseException:
            await stack.aclose()
            raise
        self._stack = stack
        self.names = names

    async def stop(self) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.aclose()


# -- what `agentcron tools list` shows ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolRow:
    name: str
    source: str
    policy: str  # allow, approve, deny, or "approve (per call)"
    approval_timeout_s: float | None  # when a call may wait for a person
    sessions: list[str]
    description: str

    def json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source,
            "policy": self.policy,
            "approval_timeout_s": self.approval_timeout_s,
            "sessions": self.sessions,
            "description": self.description,
        }


def _rule_of(item: ToolLike) -> Any:
    if isinstance(item, UserTool):
        return item.requires_approval or (
            isinstance(item.tool, Tool) and item.tool.requires_approval
        )
    if isinstance(item, Tool):
        return item.requires_approval
    return False


def _description(item: ToolLike) -> str:
    if isinstance(item, UserTool):
        item = item.tool
    text = item.description if isinstance(item, Tool) else (getattr(item, "__doc__", None) or "")
    return (text or "").strip().splitlines()[0] if (text or "").strip() else ""


def row(
    name: str,
    source: str,
    description: str,
    rules: ToolRules,
    *,
    requires_approval: Any = False,
    own_timeout: timedelta | None = None,
    default_timeout: timedelta = DEFAULT_APPROVAL_TIMEOUT,
) -> ToolRow:
    """One tool as `tools list` shows it: its policy and approval timeout resolved as the gate
    resolves them (the file's, else the tool's own, else the default).
    """
    configured: Policy | None = rules.policies.get(name)
    policy: str
    if configured is not None:
        policy = configured
    elif callable(requires_approval):
        policy = "approve (per call)"
    else:
        policy = "approve" if requires_approval else "allow"
    timeout = rules.approval_timeouts.get(name) or own_timeout or default_timeout
    waits = policy.startswith("approve")
    return ToolRow(
        name,
        source,
        policy,
        timeout.total_seconds() if waits else None,
        rules.sessions_of(name),
        description,
    )


async def inventory(
    config: ToolConfig, *, default_timeout: timedelta = DEFAULT_APPROVAL_TIMEOUT
) -> list[ToolRow]:
    """Every tool the built-in agent gets from `config`: the scheduling tools, the entry
    points' tools and each MCP server's (started to list them, then stopped).
    """
    from agentcron.agent.tools import scheduling_tools

    configured = configured_tools(config)
    rules = configured.rules
    rows: list[ToolRow] = []
    known: dict[str, str] = {}
    for item in scheduling_tools():
        _claim(known, item.name, "agentcron")
        rows.append(
            row(item.name, "agentcron", _description(item), rules, default_timeout=default_timeout)
        )
    for extra in configured.tools:
        name = tool_name(extra)
        source = configured.sources[name]
        _claim(known, name, source)
        rows.append(
            row(
                name,
                source,
                _description(extra),
                rules,
                requires_approval=_rule_of(extra),
                own_timeout=extra.approval_timeout if isinstance(extra, UserTool) else None,
                default_timeout=default_timeout,
            )
        )
    servers = ToolServers(configured.servers, quiet=True)
    await servers.start(known)
    try:
        for server in configured.servers:
            for name, description in await server.tools():
                text = description.strip().splitlines()[0] if description.strip() else ""
                rows.append(row(name, server.source, text, rules, default_timeout=default_timeout))
    finally:
        await servers.stop()
    return rows


def merged_policies(rules: ToolRules, extra: Mapping[str, Policy] | None) -> GlobTable[Policy]:
    """The configured policies with the library's `tool_policy` over them."""
    return GlobTable({**dict(rules.policies.items()), **dict(extra or {})})
