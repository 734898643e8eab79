"""Servers that flood the agent, for the MCPEngine flow tests: usage flood_mcp.py MODE [ARG].

Each stdio mode answers `initialize` first (any request it reads is answered with the
same result), then:
ping-flood: writes `ping` requests as fast as the pipe takes them and never reads again.
stderr-flood: writes stderr as fast as the pipe takes it; after each MiB it writes a
  notification `flood/progress` with the bytes written so far on stdout.
long-line MIB [DIR]: writes MIB MiB of a message without its newline (then, with DIR, makes
  the file DIR/<pid>), then waits for stdin's end.
sse-comments (HTTP): a Streamable HTTP server on 127.0.0.1 (its port on stderr as
  `PORT n`) answering `initialize` and `tools/list` as JSON and `tools/call` with an event
  stream of comments that never ends; GET is 405.
"""
import http.server
import json
import os
import socketserver
import sys

mode = sys.argv[1]
INIT = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "flood", "version": "1"}}


def answer_initialize():
    line = sys.stdin.readline()
    request = json.loads(line)
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": INIT}) + "\n")
    sys.stdout.flush()


def write_out(text):
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        sys.exit(0)


if mode == "ping-flood":
    answer_initialize()
    ping = "".join(json.dumps({"jsonrpc": "2.0", "id": f"p{i}", "method": "ping"}) + "\n" for i in range(100))
    while True:
        write_out(ping)
elif mode == "stderr-flood":
    answer_initialize()
    chunk = ("e" * 1023 + "\n") * 64
    written = 0
    while True:
        for _ in range(16):
            try:
                sys.stderr.write(chunk)
                sys.stderr.flush()
            except BrokenPipeError:
                sys.exit(0)
            written += len(chunk)
        write_out(json.dumps({"jsonrpc": "2.0", "method": "flood/progress", "params": {"written": written}}) + "\n")
elif mode == "long-line":
    answer_initialize()
    chunk = "x" * (1 << 20)
    write_out('{"jsonrpc":"2.0","method":"flood/long","params":"')
    for _ in range(int(sys.argv[2])):
        write_out(chunk)
    if len(sys.argv) > 3:
        open(f"{sys.argv[3]}/{os.getpid()}", "w").close()
    for _ in sys.stdin:
        pass
elif mode == "sse-comments":
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_GET(self):
            self.send_response(405)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_DELETE(self):
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            message = json.loads(body)
            if "id" not in message or "method" not in message:
                self.send_response(202)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if message["method"] == "tools/call":
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                comments = (": " + "c" * 1021 + "\n") * 64
                try:
                    while True:
                        self.wfile.write(comments.encode())
                except (BrokenPipeError, ConnectionResetError):
                    return
            result = INIT if message["method"] == "initialize" else {"tools": [{"name": "endless", "inputSchema": {"type": "object"}}]}
            data = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True

    httpd = Server(("127.0.0.1", 0), Handler)
    sys.stderr.write(f"PORT {httpd.server_address[1]}\n")
    sys.stderr.flush()
    httpd.serve_forever()
else:
    sys.exit(f"unknown mode {mode}")
