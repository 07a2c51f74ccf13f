"""The `[tools]` table of the configuration: Python entry points and MCP servers, with per-tool
policy, approval timeout and per-session allow-lists (parsed and checked; `agent.tool_sources`
imports and starts them).

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

The table is validated strictly (an unknown key is an error naming it and the file).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)

from agentcron.config.env import ConfigError
from agentcron.config.file import TOOLS_SECTION, read_toml, sections
from agentcron.domain.approvals import Policy

__all__ = [
    "MAX_TOOLS",
    "McpServerConfig",
    "ToolConfig",
    "ToolConfigError",
    "ToolsTable",
    "load",
]

MAX_TOOLS = 512  # tools the agent may have in all (each one is sent to the model every request)
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


@dataclass(frozen=True)
class ToolConfig:
    """A validated `[tools]` table, the file it came from, and the values its MCP servers'
    `${NAME}` references are expanded from (the settings' values: the environment over the
    configuration file; None = the process environment).
    """

    table: ToolsTable = field(default_factory=ToolsTable)
    source: Path | None = None
    environ: Mapping[str, str] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def parse(
        cls,
        data: Mapping[str, Any],
        source: Path | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> ToolConfig:
        """From the `[tools]` table as TOML reads it; ToolConfigError names what is wrong."""
        where = str(source) if source is not None else "the tools configuration"
        try:
            return cls(ToolsTable.model_validate(data), source, environ)
        except ValidationError as exc:
            raise ToolConfigError(_problems(exc, where)) from None

    @property
    def empty(self) -> bool:
        t = self.table
        return not (t.python or t.mcp or t.policy or t.approval_timeout or t.sessions)


def load(path: Path | str, environ: Mapping[str, str] | None = None) -> ToolConfig:
    """The `[tools]` table of a TOML file (the configuration file, or a file of its own);
    an empty ToolConfig when it has none. Any other top-level table must be one of the
    configuration file's sections.
    """
    path = Path(path)
    data = read_toml(path, "tools file", ToolConfigError)
    known = sections() | {TOOLS_SECTION}
    for key in data:
        if key not in known:
            raise ToolConfigError(f"{path}: unknown section [{key}]; the tools are in [tools]")
    table = data.get("tools", {})
    if not isinstance(table, dict):
        raise ToolConfigError(f"{path}: tools must be a table ([tools])")
    return ToolConfig.parse(table, path, environ)
