"""The agent's tools from configuration: Python entry points and MCP servers, with per-tool
policy, approval timeout and per-session allow-lists.

They live in the `[tools]` table of the configuration file (`--config`, `$AGENTCRON_CONFIG`),
or of the file `$AGENTCRON_TOOLS_FILE` (`serve --tools`) names instead::

    [tools]
    python = ["mytools.ci:check_build"]          # module:function, or module:attr naming a
                                                 # list of tools, a pydantic-ai Tool, a UserTool
    [tools.mcp.files]                            # a stdio server; its tools are files_<name>
    command = "python"
    args = ["-m", "files_server"]
    env = { ROOT = "/srv/files" }

    [tools.mcp.search]                           # a streamable-HTTP server
    url = "https://mcp.example.com/mcp"
    headers = { Authorization = "Bearer ..." }

    [tools.policy]                               # tool name or glob -> allow | approve | deny
    check_build = "approve"
    "files_*" = "approve"

    [tools.approval_timeout]                     # seconds a call waits for a person
    check_build = 600

    [tools.sessions]                             # session key or glob -> tools it may use
    "telegram:*" = ["cron", "check_build"]

The table is validated strictly (an unknown key is an error naming it and the file). MCP
servers are reached through pydantic-ai's MCP client (`pydantic_ai.mcp.MCPToolset`, on the
FastMCP client); `ToolServers` starts them with `AgentCron.start` and stops them with `close`,
and a server that does not start fails the start with a `ToolConfigError`.
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
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TextIO, cast

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)
from pydantic_ai import Tool

from agentcron.agent.gate import ToolLike, UserTool
from agentcron.agent.tool_rules import GlobTable, ToolRules
from agentcron.config import ConfigError
from agentcron.config_file import SETTINGS, read_toml
from agentcron.domain.approvals import DEFAULT_APPROVAL_TIMEOUT, Policy

if TYPE_CHECKING:
    from fastmcp.client.transports import StdioTransport
    from pydantic_ai.mcp import MCPToolset
    from pydantic_ai.toolsets import AbstractToolset

__all__ = [
    "MAX_TOOLS",
    "ConfiguredTools",
    "McpServer",
    "McpServerConfig",
    "ToolConfig",
    "ToolConfigError",
    "ToolRow",
    "ToolServers",
    "ToolsTable",
    "expand_env",
    "import_tools",
    "inventory",
    "load",
    "merged_policies",
    "names_of",
    "tool_name",
]

MAX_TOOLS = 512  # tools the agent may have in all (each one is sent to the model every request)
_MAX_TOOLS_PER_ENTRY = 256
_MAX_TEXT = 4096

ServerName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,31}$")]
# A tool name or a glob of tool names (fnmatch: *, ?, [...]).
ToolPattern = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.*?\[\]!-]{1,128}$")]
# A session key or a glob of session keys (printable, no spaces).
SessionPattern = Annotated[str, StringConstraints(pattern=r"^[!-~]{1,233}$")]
EntryPoint = Annotated[
    str,
    StringConstraints(
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"
        r":[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$",
        max_length=300,
    ),
]
Text = Annotated[str, StringConstraints(min_length=1, max_length=_MAX_TEXT)]
EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]
HeaderName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$")]
Url = Annotated[str, StringConstraints(pattern=r"^https?://[^\s]+$", max_length=2048)]
Seconds = Annotated[float, Field(gt=0, le=86_400)]


class ToolConfigError(ConfigError):
    """The tools' configuration is not usable: a bad key or value, an entry point that does
    not import, an MCP server that does not start, a name two tools share.
    """


class McpServerConfig(BaseModel):
    """One MCP server: a stdio command (`command`, `args`, `env`, `cwd`) or a streamable-HTTP
    `url` (with `headers`). Its tools are named `<prefix>_<tool>` (prefix: the server's name;
    `prefix = ""` for none).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    command: Text | None = None
    args: Annotated[list[Text], Field(max_length=64)] = []
    env: Annotated[
        dict[EnvName, Annotated[str, StringConstraints(max_length=_MAX_TEXT)]], Field(max_length=64)
    ] = {}
    cwd: Text | None = None
    url: Url | None = None
    headers: Annotated[
        dict[HeaderName, Annotated[str, StringConstraints(max_length=8192)]], Field(max_length=32)
    ] = {}
    prefix: (
        Annotated[str, StringConstraints(pattern=r"^([A-Za-z][A-Za-z0-9_-]{0,31})?$")] | None
    ) = None
    timeout: Seconds = 10.0  # to start and answer `initialize`

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give `command` (a stdio server) or `url` (streamable HTTP), not both")
        if self.url is not None and (self.args or self.env or self.cwd):
            raise ValueError("`args`, `env` and `cwd` are for a stdio server (`command`)")
        if self.command is not None and self.headers:
            raise ValueError("`headers` are for an HTTP server (`url`)")
        return self

    def describe(self) -> str:
        """How the server is reached, for messages (no env values, no headers)."""
        if self.url is not None:
            return self.url
        return " ".join([self.command or "", *self.args])


class ToolsTable(BaseModel):
    """The `[tools]` table."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    python: Annotated[list[EntryPoint], Field(max_length=64)] = []
    mcp: Annotated[dict[ServerName, McpServerConfig], Field(max_length=16)] = {}
    policy: Annotated[dict[ToolPattern, Policy], Field(max_length=512)] = {}
    approval_timeout: Annotated[dict[ToolPattern, Seconds], Field(max_length=512)] = {}
    sessions: Annotated[
        dict[SessionPattern, Annotated[list[ToolPattern], Field(max_length=256)]],
        Field(max_length=256),
    ] = {}


_TOOL_HELP = "a tool name or glob: letters, digits and _ . - * ? [ ] ! (128 at most)"
_PATTERN_HELP = {
    "python": "an entry point is module:attribute, e.g. mytools.ci:check_build",
    "mcp": "a server name is a letter, then letters, digits, _ or - (32 at most)",
    "url": "a URL starts with http:// or https:// and has no spaces",
    "prefix": "a prefix is empty, or a letter, then letters, digits, _ or - (32 at most)",
    "env": "an environment variable name is letters, digits and _",
    "headers": "a header name is letters, digits and !#$%&'*+.^_`|~-",
    "sessions": "a session key or glob: printable characters, no spaces (233 at most)",
}


def _problems(exc: ValidationError, where: str) -> str:
    """pydantic's errors as lines that name the file, the table and the key."""
    lines = []
    for error in exc.errors()[:10]:
        loc = [str(part) for part in error["loc"]]
        is_key = "[key]" in loc
        loc = [part for part in loc if part != "[key]"]
        dotted = ".".join(["tools", *loc])
        if error["type"] == "extra_forbidden":
            table = ".".join(["tools", *loc[:-1]])
            lines.append(f"{where}: unknown key {loc[-1]!r} in [{table}]")
        elif error["type"] == "string_pattern_mismatch":
            field_name = next((p for p in reversed(loc) if p in _PATTERN_HELP), "")
            if field_name == "sessions" and not is_key:
                field_name = ""
            if field_name == "mcp" and not is_key:
                field_name = ""
            hint = _PATTERN_HELP.get(field_name, _TOOL_HELP)
            lines.append(f"{where}: {dotted}: {error['input']!r} is not valid: {hint}")
        else:
            message = str(error["msg"]).removeprefix("Value error, ")
            lines.append(f"{where}: {dotted}: {message}")
    return "; ".join(lines)


def _known_sections() -> frozenset[str]:
    return frozenset(s.key.partition(".")[0] for s in SETTINGS)


@dataclass(frozen=True)
class ToolConfig:
    """A validated `[tools]` table and the file it came from."""

    table: ToolsTable = field(default_factory=ToolsTable)
    source: Path | None = None

    @classmethod
    def parse(cls, data: Mapping[str, Any], source: Path | None = None) -> ToolConfig:
        """From the `[tools]` table as TOML reads it; ToolConfigError names what is wrong."""
        where = str(source) if source is not None else "the tools configuration"
        try:
            return cls(ToolsTable.model_validate(data), source)
        except ValidationError as exc:
            raise ToolConfigError(_problems(exc, where)) from None

    @property
    def empty(self) -> bool:
        t = self.table
        return not (t.python or t.mcp or t.policy or t.approval_timeout or t.sessions)

    def rules(self) -> ToolRules:
        t = self.table
        return ToolRules.of(
            t.policy,
            {name: timedelta(seconds=s) for name, s in t.approval_timeout.items()},
            t.sessions,
        )

    def build(self) -> ConfiguredTools:
        """Import the entry points and make (not start) the MCP servers' toolsets."""
        tools: list[ToolLike] = []
        sources: dict[str, str] = {}
        for entry in self.table.python:
            for item in import_tools(entry):
                name = tool_name(item)
                _claim(sources, name, f"python {entry}")
                tools.append(item)
        servers = [McpServer(name, server) for name, server in self.table.mcp.items()]
        return ConfiguredTools(tools, sources, servers, self.rules())


def load(path: Path | str) -> ToolConfig:
    """The `[tools]` table of a TOML file (the configuration file, or a file of its own);
    an empty ToolConfig when it has none. Any other top-level table must be one of the
    configuration file's sections.
    """
    path = Path(path)
    data = read_toml(path, "tools file", ToolConfigError)
    known = _known_sections() | {"tools"}
    for key in data:
        if key not in known:
            raise ToolConfigError(f"{path}: unknown section [{key}]; the tools are in [tools]")
    table = data.get("tools", {})
    if not isinstance(table, dict):
        raise ToolConfigError(f"{path}: tools must be a table ([tools])")
    return ToolConfig.parse(table, path)


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
    """`${NAME}` / `${NAME:-default}` in a server's args, env, url or headers, from the
    environment (secrets stay out of the file); an unset NAME without a default is an error.
    """
    env = os.environ if environ is None else environ

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

    def __init__(self, name: str, config: McpServerConfig) -> None:
        from pydantic_ai.mcp import MCPToolset

        self.name = name
        self.config = config
        self.prefix = name if config.prefix is None else config.prefix
        self._stdio: StdioTransport | None = None
        self._log: TextIO | None = None  # where a quiet stdio server's stderr goes
        where = f"tools.mcp.{name}"
        if config.command is not None:
            from fastmcp.client.transports import StdioTransport

            env = {k: expand_env(v, f"{where}.env.{k}") for k, v in config.env.items()}
            # keep_alive=False: leaving the toolset ends the subprocess (no orphan server).
            self._stdio = StdioTransport(
                config.command,
                [expand_env(arg, f"{where}.args") for arg in config.args],
                env=env or None,
                cwd=config.cwd,
                keep_alive=False,
            )
            self.toolset: MCPToolset[Any] = MCPToolset(
                self._stdio, id=name, init_timeout=config.timeout
            )
        else:
            headers = {k: expand_env(v, f"{where}.headers.{k}") for k, v in config.headers.items()}
            self.toolset = MCPToolset(
                expand_env(config.url or "", f"{where}.url"),
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

    configured = config.build()
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
