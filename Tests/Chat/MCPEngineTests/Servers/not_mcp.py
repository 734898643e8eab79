"""Servers that break MCP, for the MCPEngine tests: usage not_mcp.py MODE.

silent: reads stdin and never answers (exits when stdin closes).
stubborn: never answers and ignores stdin's end and SIGTERM (only SIGKILL ends it); it
  starts a `sleep` in its process group first and names its pid on stderr.
garbage: answers every line with text that is not JSON-RPC.
huge: answers with one line longer than any message the client accepts.
"""
import signal
import subprocess
import sys
import time

mode = sys.argv[1]
if mode == "silent":
    for _ in sys.stdin:
        pass
elif mode == "stubborn":
    child = subprocess.Popen(["sleep", "3600"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sys.stderr.write(f"child {child.pid}\n")
    sys.stderr.flush()
    sys.stdin.close()
    while True:
        time.sleep(3600)
elif mode == "garbage":
    for _ in sys.stdin:
        sys.stdout.write("this is not JSON-RPC\n")
        sys.stdout.flush()
elif mode == "huge":
    sys.stdin.readline()
    chunk = "x" * (1 << 20)
    try:
        sys.stdout.write('{"jsonrpc":"2.0","id":1,"result":"')
        for _ in range(40):
            sys.stdout.write(chunk)
        sys.stdout.write('"}\n')
        sys.stdout.flush()
    except BrokenPipeError:
        pass
