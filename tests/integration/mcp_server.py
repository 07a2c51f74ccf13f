"""A small MCP server for the tests (the `mcp` SDK's MCPServer): stdio by default, or
`serve_http(port)` for streamable HTTP. Each call is appended to $MCP_TEST_LOG when set, so a
test can see that the server (not something else) ran the tool.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" and sys.argv[1:] == ["--exit"]:  # a server that fails at once
    sys.exit(3)

from mcp.server.mcpserver import MCPServer

server = MCPServer("testtools")


def _log(line: str) -> None:
    path = os.environ.get("MCP_TEST_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    _log(f"add {a} {b}")
    return a + b


@server.tool()
def shout(text: str) -> str:
    """Say a text in capitals."""
    _log(f"shout {text}")
    return text.upper()


if __name__ == "__main__":
    server.run("stdio")
