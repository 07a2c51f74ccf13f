"""The scheduling tools served over MCP: the same functions, schemas and rules the agent gets.

`scheduling_server(deps_for)` is an MCP server (the official `mcp` SDK's low-level `Server`)
whose tools are `scheduling_tools()`: their names, descriptions and JSON schemas come from the
same pydantic-ai `Tool` definitions the built-in agent is given, arguments are validated by
the same validators, and a call runs the same function with the `ToolDeps` of the session the
connection is bound to (`deps_for(ctx)`; the edges bind it: `server/mcp.py`, `cli/mcp_cmds.py`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from pydantic import ValidationError
from pydantic_ai import RunContext, Tool

from agentcron.agent.tool_deps import ToolDeps
from agentcron.agent.tools import scheduling_tools
from agentcron.errors import AgentcronError
from agentcron.version import __version__

__all__ = ["DepsFor", "scheduling_server"]

SERVER_NAME = "agentcron"
DepsFor = Callable[[ServerRequestContext[Any, Any]], Awaitable[ToolDeps]]


@dataclass(frozen=True, slots=True)
class _Context:
    """What the tool functions read of their `RunContext`: only `deps` (an MCP call has no
    model run around it, so the rest of a `RunContext` does not exist here).
    """

    deps: ToolDeps


def _text(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=error)


def scheduling_server(deps_for: DepsFor) -> Server[Any]:
    """An MCP server with the scheduling tools; each call runs for the session `deps_for`
    names (it raises an `AgentcronError` when the connection has no usable session).
    """
    tools: dict[str, Tool[ToolDeps]] = {tool.name: tool for tool in scheduling_tools()}
    listed = [
        types.Tool(
            name=tool.name,
            description=tool.description,
            input_schema=tool.function_schema.json_schema,
        )
        for tool in tools.values()
    ]

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        tool = tools.get(params.name)
        if tool is None:
            return _text(f"Error: no tool {params.name!r} (tools: {', '.join(tools)})", error=True)
        try:
            args = tool.function_schema.validator.validate_python(params.arguments or {})
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in exc.errors()
            )
            return _text(f"Error: {problems}", error=True)
        try:
            deps = await deps_for(ctx)
        except AgentcronError as exc:
            return _text(f"Error: {exc}", error=True)
        context = cast(RunContext[ToolDeps], _Context(deps))
        said = str(await tool.function_schema.call(args, context))
        # The tools tell a refusal as text ("Error: ..."), as the agent reads it; MCP marks it.
        return _text(said, error=said.startswith("Error:"))

    return Server(
        SERVER_NAME,
        version=__version__,
        instructions="Schedule work for this chat session: automations (`cron`) and your own "
        "follow-ups (`schedule_recall`, `manage_recall`). Times are read on the server.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
