"""`agentcron tools`: the tools the built-in agent has, where each comes from, its policy."""

from __future__ import annotations

import asyncio

import typer
from rich.table import Table

from agentcron.cli.common import JsonOpt, ToolsFileOpt, fail, out, print_json, settings

app = typer.Typer(
    help="The agent's tools: the scheduling tools, entry points and MCP servers.",
    no_args_is_help=True,
)


@app.command("list")
def tools_list(ctx: typer.Context, tools: ToolsFileOpt = None, as_json: JsonOpt = False) -> None:
    """Show every tool the agent has (the MCP servers are started to list theirs), with its
    source, policy, approval timeout and the sessions that may use it.
    """
    from agentcron.agent.tool_sources import inventory
    from agentcron.config.tools import ToolConfigError

    config = settings(ctx)
    path = config.tools_file(tools)
    try:
        rows = asyncio.run(inventory(config.tools(path)))
    except ToolConfigError as exc:
        raise fail(str(exc), 2) from None
    if as_json:
        print_json(
            {"config": None if path is None else str(path), "tools": [r.json() for r in rows]}
        )
        return
    table = Table(box=None, pad_edge=False)
    for column in ("NAME", "SOURCE", "POLICY", "TIMEOUT", "SESSIONS", "DESCRIPTION"):
        table.add_column(column, overflow="fold")
    for r in rows:
        timeout = "-" if r.approval_timeout_s is None else f"{r.approval_timeout_s:g}s"
        table.add_row(r.name, r.source, r.policy, timeout, ", ".join(r.sessions), r.description)
    out().print(table)
