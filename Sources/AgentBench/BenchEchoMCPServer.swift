import Foundation

/// A minimal stdio MCP server for `agent-bench chat`: newline-delimited JSON-RPC 2.0 with
/// `initialize` (the client's version when it is one of the server's), `ping`, `tools/list`
/// (one tool, `echo`) and `tools/call` (the `text` argument back as a text item); other
/// requests get -32601, notifications are read and dropped. Plain Python, no SDK: a call
/// costs it tens of microseconds, so the figure the benchmark subtracts is mostly the
/// transport's, not the server framework's.
enum BenchEchoMCPServer {
    static let source = #"""
        import json, sys

        VERSIONS = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]
        TOOLS = [{"name": "echo", "description": "Echoes its text.",
                  "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}]
        out = sys.stdout

        def answer(ident, result=None, error=None):
            message = {"jsonrpc": "2.0", "id": ident}
            if error is not None:
                message["error"] = error
            else:
                message["result"] = result
            out.write(json.dumps(message, separators=(",", ":")) + "\n")
            out.flush()

        for line in iter(sys.stdin.readline, ""):
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if not isinstance(message, dict) or "id" not in message or "method" not in message:
                continue
            ident, method, params = message["id"], message["method"], message.get("params") or {}
            if method == "initialize":
                asked = params.get("protocolVersion")
                answer(ident, {"protocolVersion": asked if asked in VERSIONS else VERSIONS[0],
                               "capabilities": {"tools": {}}, "serverInfo": {"name": "bench-echo", "version": "1"}})
            elif method == "ping":
                answer(ident, {})
            elif method == "tools/list":
                answer(ident, {"tools": TOOLS})
            elif method == "tools/call":
                arguments = params.get("arguments") or {}
                if params.get("name") != "echo":
                    answer(ident, {"content": [{"type": "text", "text": "unknown tool"}], "isError": True})
                else:
                    answer(ident, {"content": [{"type": "text", "text": str(arguments.get("text", ""))}], "isError": False})
            else:
                answer(ident, error={"code": -32601, "message": "Method not found"})
        """#

    /// Writes the server into `directory` and returns its path.
    static func write(into directory: String) throws -> String {
        let path = directory + "/bench_echo_mcp.py"
        try source.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }
}
