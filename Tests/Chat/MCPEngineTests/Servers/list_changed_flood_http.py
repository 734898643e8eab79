"""A Streamable HTTP MCP server that floods notifications/tools/list_changed, for the
MCPEngine tests: usage list_changed_flood_http.py.

It listens on 127.0.0.1 on a port the system picks and writes "PORT <n>" to stderr.
initialize opens session "flood-1"; notifications are answered 202; tools/list names one
tool, "count", and is counted; tools/call "count" answers "<tools/list received>
<notifications sent>"; a GET opens an event stream on which it sends
notifications/tools/list_changed as fast as it can until the client leaves; DELETE is 200.
"""
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
COUNTS = {"lists": 0, "sent": 0}
EVENT = b'data: {"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\n\n'
BATCH = EVENT * 16


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, *args):
        pass

    def empty(self, status):
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_DELETE(self):
        self.empty(200)

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        try:
            while True:
                self.wfile.write(BATCH)
                self.wfile.flush()
                with LOCK:
                    COUNTS["sent"] += len(BATCH) // len(EVENT)
                # Let the thread answering tools/list run (the GIL): the flood must not slow
                # the listings it provokes.
                time.sleep(0)
        except OSError:
            pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        message = json.loads(self.rfile.read(length))
        if "id" not in message:
            return self.empty(202)
        method = message.get("method")
        if method == "initialize":
            result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {"listChanged": True}},
                      "serverInfo": {"name": "flood", "version": "1"}}
        elif method == "tools/list":
            with LOCK:
                COUNTS["lists"] += 1
            result = {"tools": [{"name": "count", "description": "Counts.", "inputSchema": {"type": "object"}}]}
        elif method == "tools/call":
            with LOCK:
                text = f"{COUNTS['lists']} {COUNTS['sent']}"
            result = {"content": [{"type": "text", "text": text}]}
        else:
            result = {}
        body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Mcp-Session-Id", "flood-1")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


sys.setswitchinterval(0.0005)
server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
sys.stderr.write(f"PORT {server.server_address[1]}\n")
sys.stderr.flush()
server.serve_forever()
