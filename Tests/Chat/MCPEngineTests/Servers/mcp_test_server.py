"""An MCP stdio server for the MCPEngine tests, built on the official Python SDK.

Usage: mcp_test_server.py [--page-size N] [--flood-stderr N] [--marker-dir DIR] [--transport T]

--transport stdio (the default), streamable-http or sse: the HTTP ones listen on 127.0.0.1,
on a port the system picks, and write "PORT <n>" to stderr once it accepts connections
(Streamable HTTP at /mcp, SSE at /sse).
"""
import argparse
import base64
import os
import socket
import sys

import anyio
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp_types import ListToolsResult

parser = argparse.ArgumentParser()
parser.add_argument("--page-size", type=int, default=0)
parser.add_argument("--flood-stderr", type=int, default=0)
parser.add_argument("--marker-dir", default="")
parser.add_argument("--transport", default="stdio", choices=["stdio", "streamable-http", "sse"])
options = parser.parse_args()

# A 1x1 PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUHEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)


class PagingServer(MCPServer):
    """Answers tools/list in pages of --page-size tools (the SDK itself never pages)."""

    async def _handle_list_tools(self, ctx, params):
        tools = await self.list_tools()
        if options.page_size <= 0:
            return ListToolsResult(tools=tools)
        start = int(params.cursor) if params is not None and params.cursor else 0
        end = start + options.page_size
        return ListToolsResult(tools=tools[start:end], next_cursor=str(end) if end < len(tools) else None)


server = PagingServer("engine-test")


@server.tool(description="Echoes its text.")
def echo(text: str) -> str:
    return text


@server.tool(description="A tiny PNG.")
def picture() -> Image:
    return Image(data=PNG, format="png")


@server.tool(description="Always fails.")
def fail() -> str:
    raise ValueError("this tool always fails")


@server.tool(description="Reports which environment variables it got.")
def environment(name: str) -> str:
    return os.environ.get(name, "<unset>")


WAITING = [0]


@server.tool(description="How many wait_forever calls are waiting.")
def waiting() -> str:
    return str(WAITING[0])


@server.tool(description="Waits until cancelled; writes <marker-dir>/cancelled when it is.")
async def wait_forever() -> str:
    WAITING[0] += 1
    if options.marker_dir:
        with open(os.path.join(options.marker_dir, "started"), "w") as f:
            f.write("started")
    try:
        await anyio.sleep_forever()
    except anyio.get_cancelled_exc_class():
        if not options.marker_dir:
            raise
        with open(os.path.join(options.marker_dir, "cancelled"), "w") as f:
            f.write("cancelled")
        raise
    finally:
        WAITING[0] -= 1
    return "never"


@server.tool(description="Returns the value of an HTTP request header (<unset> when absent).")
def header(name: str, ctx: Context) -> str:
    headers = ctx.headers or {}
    return headers.get(name, "<unset>")


@server.tool(description="Exits the server in the middle of the call.")
def crash() -> str:
    sys.stderr.flush()
    os._exit(3)


@server.tool(description="Adds a tool named after its argument and announces the change.")
async def add_tool(name: str, ctx: Context) -> str:
    def added() -> str:
        return "added"

    server.add_tool(added, name=name, description="Added at run time.")
    await ctx.session.send_tool_list_changed()
    return "ok"


@server.tool(description="Sends tools/list_changed COUNT times.")
async def flood_list_changed(count: int, ctx: Context) -> str:
    for _ in range(count):
        await ctx.session.send_tool_list_changed()
    return "flooded"


for index in range(5):
    server.add_tool(lambda index=index: str(index), name=f"numbered_{index}", description=f"Tool {index}.")

if options.flood_stderr:
    line = "x" * 100 + "\n"
    for _ in range(options.flood_stderr):
        sys.stderr.write(line)
    sys.stderr.flush()

if options.transport == "stdio":
    server.run()
else:
    import uvicorn

    app = server.streamable_http_app() if options.transport == "streamable-http" else server.sse_app()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    sys.stderr.write(f"PORT {listener.getsockname()[1]}\n")
    sys.stderr.flush()
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1)
    uvicorn.Server(config).run(sockets=[listener])
