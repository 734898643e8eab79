"""A plain stdio MCP server whose tools/list is hostile, for the MCPEngine tests.

Usage: huge_tools.py [--pages N] [--page-size N] [--description-bytes N] [--schema-bytes N] [--long-names N]
                     [--call-zeros N]

tools/list answers --pages pages of --page-size tools named t<page>_<index>, each with a
description of --description-bytes bytes ("x" then "é", so that a cut at a byte count may
fall inside a character) and, with --schema-bytes, an input schema padded to about that many
bytes as JSON; the first --long-names tools get 2000-byte names instead. The JSON goes out as
UTF-8 (not \\u escapes), a page per line. tools/call answers with the tool's name, or with
--call-zeros, with a content array of N zeros (`[0,0,…]`: items that are not objects, two
bytes each).
"""
import argparse
import json
import sys

parser = argparse.ArgumentParser()
parser.add_argument("--pages", type=int, default=1)
parser.add_argument("--page-size", type=int, default=15)
parser.add_argument("--description-bytes", type=int, default=16)
parser.add_argument("--schema-bytes", type=int, default=0)
parser.add_argument("--long-names", type=int, default=0)
parser.add_argument("--call-zeros", type=int, default=0)
options = parser.parse_args()

DESCRIPTION = "x" + "é" * ((options.description_bytes - 1) // 2)
SCHEMA = {"type": "object", "properties": {"pad": {"type": "string", "description": "y" * options.schema_bytes}}}


def tool(page, index):
    number = page * options.page_size + index
    name = ("n" * 2000) + str(number) if number < options.long_names else f"t{page}_{index}"
    item = {"name": name, "description": DESCRIPTION}
    if options.schema_bytes:
        item["inputSchema"] = SCHEMA
    return item


def answer(message_id, result):
    line = json.dumps({"jsonrpc": "2.0", "id": message_id, "result": result}, ensure_ascii=False)
    sys.stdout.buffer.write(line.encode() + b"\n")
    sys.stdout.buffer.flush()


for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    method = message.get("method")
    params = message.get("params") or {}
    if method == "initialize":
        answer(message["id"], {"protocolVersion": params["protocolVersion"], "capabilities": {"tools": {}},
                               "serverInfo": {"name": "huge-tools", "version": "1"}})
    elif method == "tools/list":
        page = int(params.get("cursor") or 0)
        result = {"tools": [tool(page, index) for index in range(options.page_size)]}
        if page + 1 < options.pages:
            result["nextCursor"] = str(page + 1)
        answer(message["id"], result)
    elif method == "tools/call" and options.call_zeros:
        reply = '{"jsonrpc":"2.0","id":%s,"result":{"content":[%s]}}' % (json.dumps(message["id"]), ",".join(["0"] * options.call_zeros))
        sys.stdout.buffer.write(reply.encode() + b"\n")
        sys.stdout.buffer.flush()
    elif method == "tools/call":
        answer(message["id"], {"content": [{"type": "text", "text": params["name"]}]})
    else:
        answer(message["id"], {})
