"""HTTP servers that break MCP, for the MCPEngine tests: usage not_mcp_http.py MODE.

It listens on 127.0.0.1 on a port the system picks and writes "PORT <n>" to stderr.

garbage: answers every POST with 200 application/json that is not JSON-RPC.
huge-json: answers every POST with a 40 MiB JSON body (no Content-Length).
huge-sse: answers every POST with an event stream whose one event never ends (40 MiB).
status: answers every POST with 500 and a text body.
redirect: answers every request with 307 to the same path on another origin (localhost).
sse-off-origin: a legacy SSE stream whose endpoint event names another origin.
json: a minimal Streamable HTTP server that answers with JSON bodies: session "sid-1",
  202 to notifications, 405 to GET, tools/list names one tool "echo", tools/call "expire"
  answered 404 (the session expired), any other tool echoes its name; it writes
  "DELETE <session id>" to stderr when deleted.
json-keepalive: json over HTTP/1.1 keep-alive connections that only the client closes; it
  writes "OPEN <connection>" when one opens and "END <connection>" when it ends.
json-drop-once: json-keepalive, but the first time each JSON-RPC method arrives the server
  reads the whole request and closes the connection without answering (what a client sees
  when a server closes an idle connection just as the request arrives); it writes
  "REQUEST <connection> <nth request on it> <method>" for every POST and "DROPPED <method>".
json-stalled-bodies: json, but a notification's 202 and the DELETE's 200 announce a body
  (Content-Length: 10) and send none, the connection held open; it writes "STALLED <what>"
  for each (the notification's method, or DELETE).
"""
import itertools
import json
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

mode = sys.argv[1]
CHUNK = b"x" * (1 << 20)
CONNECTIONS = itertools.count(1)
DROPPED = set()
LOCK = threading.Lock()


def note(line):
    with LOCK:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1" if mode.startswith("json-") else "HTTP/1.0"

    def log_message(self, *args):
        pass

    def setup(self):
        super().setup()
        self.connection_number = next(CONNECTIONS)
        self.requests_served = 0
        if mode.startswith("json-"):
            note(f"OPEN {self.connection_number}")

    def finish(self):
        super().finish()
        if mode.startswith("json-"):
            note(f"END {self.connection_number}")

    def read_body(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)

    def do_GET(self):
        port = self.server.server_address[1]
        if mode == "redirect":
            return self.redirect()
        if mode == "sse-off-origin":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            self.wfile.write(f"event: endpoint\ndata: http://localhost:{port}/messages\n\n".encode())
            self.wfile.flush()
            # Hold the stream until the client leaves.
            try:
                while self.rfile.read(1):
                    pass
            except OSError:
                pass
            return
        self.send_response(405)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_DELETE(self):
        note(f"DELETE {self.headers.get('Mcp-Session-Id')}")
        self.send_response(200)
        if mode == "json-stalled-bodies":
            self.stall("DELETE")
            return
        self.send_header("Content-Length", "0")
        self.end_headers()

    def stall(self, what):
        """Ends a head that announces a body of 10 bytes, sends none, and leaves the
        connection open: the handler then waits for a next request the client never sends."""
        self.send_header("Content-Length", "10")
        self.end_headers()
        self.wfile.flush()
        note(f"STALLED {what}")

    def answer_json(self):
        length = int(self.headers.get("Content-Length") or 0)
        message = json.loads(self.rfile.read(length))
        self.requests_served += 1
        method = message.get("method", "response")
        if mode == "json-drop-once":
            note(f"REQUEST {self.connection_number} {self.requests_served} {method}")
            with LOCK:
                first = method not in DROPPED
                DROPPED.add(method)
            if first:
                note(f"DROPPED {method}")
                self.close_connection = True
                return
        if "id" not in message:
            self.send_response(202)
            if mode == "json-stalled-bodies":
                self.stall(method)
                return
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if message["method"] == "initialize":
            result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "raw", "version": "1"}}
        elif self.headers.get("Mcp-Session-Id") != "sid-1":
            self.send_response(400)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        elif message["method"] == "tools/list":
            result = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
        elif message["method"] == "tools/call" and message["params"]["name"] == "expire":
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        else:
            text = message["params"]["name"] + " " + self.headers.get("MCP-Protocol-Version", "")
            result = {"content": [{"type": "text", "text": text}]}
        body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Mcp-Session-Id", "sid-1")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        if mode.startswith("json"):
            return self.answer_json()
        self.read_body()
        try:
            if mode == "garbage":
                body = b"this is not JSON-RPC"
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            elif mode == "huge-json":
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"jsonrpc":"2.0","id":1,"result":"')
                for _ in range(40):
                    self.wfile.write(CHUNK)
            elif mode == "huge-sse":
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                self.wfile.write(b'data: {"jsonrpc":"2.0","id":1,"result":"')
                for _ in range(40):
                    self.wfile.write(CHUNK)
            elif mode == "status":
                body = b"the server broke"
                self.send_response(500)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            elif mode == "redirect":
                self.redirect()
            else:
                self.send_response(404)
                self.end_headers()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def redirect(self):
        port = self.server.server_address[1]
        self.send_response(307)
        self.send_header("Location", f"http://localhost:{port}{self.path}")
        self.send_header("Content-Length", "0")
        self.end_headers()


# Room for every exchange a client may open at once (64) to connect without a SYN retry.
ThreadingHTTPServer.request_queue_size = 128
server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
sys.stderr.write(f"PORT {server.server_address[1]}\n")
sys.stderr.flush()
server.serve_forever()
