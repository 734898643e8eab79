import AgentCore
import AgentHTTP
import AgentTestSupport
import Foundation
import HTTPTypes
import Synchronization
import Testing

@testable import MCPEngine

/// What a user sees and does beyond the reference: a server restarted after its code changed
/// (its tools listed anew), the tools with bounded descriptions in `GET /servers?tools=true`,
/// and a server's own call cap answered as busy (503 with `Retry-After`), not as a failure.
/// Serialized, as ``MCPServerManagerTests``: each test starts Python servers.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct MCPServerRestartTests {
    typealias Harness = MCPServerManagerTests.Harness

    /// A raw stdio MCP server (no SDK) with one tool named by the `tool-name` file beside
    /// it, read once at start: changing that file is changing the server's code.
    static let rawServer = """
        import json, os, sys
        here = os.path.dirname(os.path.abspath(__file__))
        name = open(os.path.join(here, "tool-name")).read().strip()
        for line in sys.stdin:
            msg = json.loads(line)
            if "id" not in msg:
                continue
            method = msg["method"]
            if method == "initialize":
                result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                          "serverInfo": {"name": "raw", "version": "1"}}
            elif method == "tools/list":
                result = {"tools": [{"name": name, "description": "The " + name + " tool.", "inputSchema": {"type": "object"}}]}
            elif method == "tools/call":
                result = {"content": [{"type": "text", "text": name}]}
            else:
                result = {}
            print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
        """

    @Test func restartConnectsAgainWithTheNewCodeAndItsTools() async throws {
        let h = try Harness()
        defer { Task { await h.stop() } }
        try Self.rawServer.write(toFile: h.directory + "/server.py", atomically: true, encoding: .utf8)
        try "old_tool".write(toFile: h.directory + "/tool-name", atomically: true, encoding: .utf8)
        try h.write(["raw": ["command": "python3", "args": [h.directory + "/server.py"]]])
        h.start()
        #expect(await eventually { h.entry("raw")?.tools.map(\.name) == ["old_tool"] })
        let before = try #require(h.server("raw"))
        let oldPID = try #require(before.pid)

        // The code changes; the entry does not, so nothing reloads it.
        try "new_tool".write(toFile: h.directory + "/tool-name", atomically: true, encoding: .utf8)
        #expect(h.manager.serverTools["raw"]?.map(\.name) == ["old_tool"])

        let after = try await h.manager.restart("raw")
        #expect(after.state == .connected && after.restarts == before.restarts + 1 && after.toolCount == 1, "\(after)")
        #expect(after.pid != nil && after.pid != oldPID)
        #expect(h.manager.serverTools["raw"]?.map(\.name) == ["new_tool"])
        #expect(h.entry("raw")?.tools.map(\.name) == ["new_tool"])
        // The old server is gone (its group was stopped), and calls reach the new one.
        #expect(await eventually { MCPTestServers.isGoneOrZombie(oldPID) })
        let result = try await h.manager.callTool("raw__new_tool", arguments: nil)
        #expect(result.content.first?.text == "new_tool")

        // An unknown name is refused, with the reference's words for an unknown server.
        await #expect(throws: MCPRestartFailure.unknownServer("nope")) { try await h.manager.restart("nope") }
        #expect(MCPRestartFailure.unknownServer("nope").detail == #"unknown MCP server: "nope""#)
    }

    @Test func restartOfAServerThatNoLongerStartsSaysWhy() async throws {
        let h = try Harness()
        defer { Task { await h.stop() } }
        try Self.rawServer.write(toFile: h.directory + "/server.py", atomically: true, encoding: .utf8)
        try "old_tool".write(toFile: h.directory + "/tool-name", atomically: true, encoding: .utf8)
        try h.write(["raw": ["command": "python3", "args": [h.directory + "/server.py"]]])
        h.start()
        #expect(await eventually { h.entry("raw")?.connected == true })
        // The code is broken now: the server exits at start.
        try "import sys\nsys.stderr.write('broken\\n')\nsys.exit(4)\n".write(toFile: h.directory + "/server.py", atomically: true, encoding: .utf8)
        do {
            _ = try await h.manager.restart("raw")
            Issue.record("the restart succeeded")
        } catch {
            guard case .failed(let why) = error else { Issue.record("\(error)"); return }
            #expect(why.hasPrefix("failed to connect: "), "\(why)")
        }
        #expect(h.entry("raw")?.connected == false)
    }

    @Test func aServersOwnCallCapAnswersBusy() async throws {
        let h = try Harness(servers: ["alpha": MCPServerManagerTests.python()])
        defer { Task { await h.stop() } }
        h.start()
        #expect(await eventually { h.entry("alpha")?.connected == true })
        let limit = MCPLimits.maxConcurrentCalls
        let waiting = (0..<limit).map { _ in
            Task { try? await h.manager.callTool("alpha__wait_forever", arguments: nil) }
        }
        defer { for task in waiting { task.cancel() } }
        #expect(await eventually { h.server("alpha")?.callsInFlight == limit })
        do {
            _ = try await h.manager.callTool("alpha__echo", arguments: .object([("text", .string("x"))]))
            Issue.record("a call past the server's cap was admitted")
        } catch {
            #expect(error == .serverBusy(server: "alpha", limit: limit))
            let api = MCPRoutes.apiError(error)
            #expect(api.status == .serviceUnavailable && api.headers[.retryAfter] == "1", "\(api)")
            #expect(api.body.detail == #"MCP server "alpha" has 16 calls in flight; try again later"#)
        }
        for task in waiting { task.cancel() }
        #expect(await eventually { h.manager.callsInFlight == 0 })
        // Slots come back: a call goes through again.
        let echo = try await h.manager.callTool("alpha__echo", arguments: .object([("text", .string("x"))]))
        #expect(echo.content.first?.text == "x")
    }

    @Test func toolListingsAreBounded() throws {
        let status = MCPServerStatus(
            name: "s", transport: "stdio", state: .connected, lastError: "", toolCount: 3, restarts: 0, pid: nil, protocolVersion: nil,
            callsInFlight: 0)
        let long = String(repeating: "é", count: 400)  // 800 bytes
        let tools = [
            ContextTool(name: "a", description: "short", inputSchema: nil),
            ContextTool(name: "b", description: long, inputSchema: nil),
        ]
        let answer = MCPServersJSON([status], tools: ["s": tools])
        let listed = try #require(answer.servers.first?.tools)
        #expect(listed.map(\.name) == ["a", "b"] && listed[0].description == "short")
        #expect(listed[1].description.utf8.count <= MCPServersJSON.maxDescriptionBytes && listed[1].description.hasSuffix("…"))
        #expect(listed[1].description.dropLast().allSatisfy { $0 == "é" })
        #expect(answer.servers.first?.toolsOmitted == nil)
        // Without the flag, no tools key at all.
        #expect(MCPServersJSON([status], tools: nil).servers.first?.tools == nil)
        // Past the answer's budget, tools are left out and counted.
        let many = (0..<10_000).map { ContextTool(name: "tool_\($0)", description: long, inputSchema: nil) }
        let big = MCPServersJSON([status], tools: ["s": many])
        let kept = big.servers.first?.tools?.count ?? 0
        #expect(kept > 0 && kept < many.count && big.servers.first?.toolsOmitted == many.count - kept)
        #expect(MCPRoutes.parseBool("true") == true && MCPRoutes.parseBool(nil) == false && MCPRoutes.parseBool("yes") == nil)
    }
}

/// An entry no retry can fix is reported, not retried forever.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct MCPPermanentFailureTests {
    @Test func anUnsupportedTransportIsReportedOnceNotRetried() async throws {
        let h = try MCPServerManagerTests.Harness(servers: ["odd": ["type": "websocket", "url": "http://127.0.0.1:1/"]])
        defer { Task { await h.stop() } }
        h.start()
        #expect(await eventually { h.server("odd")?.lastError.isEmpty == false })
        #expect(h.server("odd")?.lastError == #"failed to connect: unsupported transport "websocket""#)
        #expect(h.entry("odd")?.connected == false)
        // Settled without a retry pending (a retry would be scheduled in the same step).
        #expect(h.manager.state.withLock { $0.servers["odd"]?.retry } == nil)
    }
}
