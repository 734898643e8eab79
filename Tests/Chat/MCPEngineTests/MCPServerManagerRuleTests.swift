import AgentCore
import AgentHTTP
import HTTPTypes
import AgentTestSupport
import Testing

@testable import MCPEngine

/// The engine's rules without an MCP SDK server: tool-name splitting, restart delays, schema
/// reduction as plain values, and a failed connect's error cut and redacted (a few lines of
/// plain Python stand in for the server). They run side by side (no serialization needed).
@Suite(.timeLimit(.minutes(5)))
struct MCPServerManagerRuleTests {
    typealias Harness = MCPServerManagerTests.Harness

    /// A server whose `initialize` fails with a 1 MiB message: the error kept (and published
    /// upward) is cut to the control plane's 4096 bytes, and its secrets are redacted.
    @Test func aHugeErrorIsCutAndRedacted() async throws {
        let script = """
            import json, sys
            msg = json.loads(sys.stdin.readline())
            text = "key=hunter2-secret " + "x" * (1 << 20)
            print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32000, "message": text}}), flush=True)
            sys.stdin.read()
            """
        let h = try Harness(
            servers: ["huge": ["command": "python3", "args": ["-c", script], "env": ["API_KEY": "hunter2-secret"]]],
            restart: MCPRestartPolicy(initial: .seconds(30), maximum: .seconds(30)))
        h.start()
        #expect(await eventually { h.entry("huge")?.error.isEmpty == false })
        let error = try #require(h.entry("huge")?.error)
        #expect(error.utf8.count <= ContextRedactor.maxTextBytes, "\(error.utf8.count)")
        #expect(error.hasPrefix("failed to connect: initialize: key=[redacted] xxx"), "\(error.prefix(80))")
        #expect(error.hasSuffix(ContextRedactor.truncatedSuffix))
        #expect(!error.contains("hunter2"))
        #expect(h.server("huge")?.lastError == error)
        await h.stop()
    }

    /// A declared server that has never had a session is unknown to a call, as in the
    /// reference (which keeps only servers that connected): 404 with the reference's detail,
    /// then why: its failed connect, or that it is still connecting.
    @Test func aCallToAServerThatNeverConnectedIsA404() async throws {
        let h = try Harness(
            servers: [
                "missing": ["command": "no-such-mcp-server-command"],
                "silent": ["command": "python3", "args": ["\(MCPTestServers.directory)/not_mcp.py", "silent"]],
            ],
            timeouts: .init(connect: .seconds(120)), restart: MCPRestartPolicy(initial: .seconds(60), maximum: .seconds(60)))
        h.start()
        #expect(await eventually { h.server("missing")?.lastError.contains("executable file not found") == true })
        let why = try #require(h.server("missing")?.lastError)
        do {
            _ = try await h.manager.callTool("missing__x", arguments: nil)
            Issue.record("a call to a server that never connected succeeded")
        } catch {
            #expect(error == .neverConnected(server: "missing", why: why))
            let api = MCPRoutes.apiError(error)
            #expect(api.status == .notFound && api.body.message == "MCP tool call failed.", "\(api)")
            #expect(api.body.detail == #"unknown MCP server: "missing" (declared, not connected: "# + why + ")", "\(api)")
            #expect(why.hasPrefix("failed to connect: "), "\(why)")
        }

        #expect(await eventually { h.server("silent")?.state == .connecting })
        do {
            _ = try await h.manager.callTool("silent__x", arguments: nil)
            Issue.record("a call to a server still connecting succeeded")
        } catch {
            #expect(error == .neverConnected(server: "silent", why: "still connecting"))
            let api = MCPRoutes.apiError(error)
            #expect(api.status == .notFound && api.body.detail == #"unknown MCP server: "silent" (declared, not connected: still connecting)"#, "\(api)")
        }
        #expect(h.manager.callsInFlight == 0)
        await h.stop()
    }

    /// A server that had a session which ended (here it exits at its first call) is not
    /// unknown: until it is back, a call fails with 502, as the reference's call on the dead
    /// session it keeps.
    @Test func aCallToAServerWhoseSessionEndedIsA502() async throws {
        let script = """
            import json, sys
            for line in sys.stdin:
                msg = json.loads(line)
                method = msg.get("method")
                if method == "initialize":
                    result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}}, "serverInfo": {"name": "brief", "version": "1"}}
                    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
                elif method == "tools/list":
                    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {"tools": []}}), flush=True)
                elif method == "tools/call":
                    break
            """
        let h = try Harness(
            servers: ["brief": ["command": "python3", "args": ["-c", script]]],
            restart: MCPRestartPolicy(initial: .seconds(60), maximum: .seconds(60)))
        h.start()
        #expect(await eventually { h.server("brief")?.state == .connected })
        _ = try? await h.manager.callTool("brief__exit", arguments: nil)
        #expect(await eventually { h.server("brief")?.state == .restarting && h.server("brief")?.lastError.contains("server exited") == true })
        do {
            _ = try await h.manager.callTool("brief__x", arguments: nil)
            Issue.record("a call to a server whose session ended succeeded")
        } catch {
            let api = MCPRoutes.apiError(error)
            #expect(api.status == .badGateway && api.body.message == "MCP tool call failed.", "\(api)")
            #expect(error.detail.hasPrefix(#"call tool "x" on "brief": server "brief" is not connected: server exited"#), "\(error.detail)")
        }
        await h.stop()
    }

    /// A listing that fails because its session ended (the server exits when `list_changed`
    /// has it listed again) leaves the server restarting with why it exited, not marked as a
    /// failed listing: the session's end and the listing's failure arrive in either order.
    @Test func aListingEndedByItsSessionsEndLeavesTheServerRestarting() async throws {
        let script = """
            import json, sys
            lists = 0
            for line in sys.stdin:
                msg = json.loads(line)
                method = msg.get("method")
                if method == "initialize":
                    result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {"listChanged": True}}, "serverInfo": {"name": "brief", "version": "1"}}
                    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
                elif method == "tools/list":
                    lists += 1
                    if lists > 1:
                        break
                    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {"tools": []}}), flush=True)
                    print(json.dumps({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}), flush=True)
            """
        let h = try Harness(
            servers: ["brief": ["command": "python3", "args": ["-c", script]]],
            restart: MCPRestartPolicy(initial: .seconds(60), maximum: .seconds(60)))
        h.start()
        #expect(await eventually { h.server("brief")?.state == .restarting })
        // The listing's own end comes at about the same moment, and nothing says when it
        // was handled: a short look after (it can only let an old failure go unseen).
        try await Task.sleep(for: .milliseconds(200))
        let server = h.server("brief")
        #expect(server?.state == .restarting && server?.lastError.contains("server exited") == true, "\(String(describing: server))")
        await h.stop()
    }

    @Test func toolNamesSplitAtTheFirstSeparator() {
        #expect(MCPServerManager.splitToolName("a__b")! == ("a", "b"))
        #expect(MCPServerManager.splitToolName("a__b__c")! == ("a", "b__c"))
        #expect(MCPServerManager.splitToolName("a___b")! == ("a", "_b"))
        #expect(MCPServerManager.splitToolName("a__") == nil)
        #expect(MCPServerManager.splitToolName("__b") == nil)
        #expect(MCPServerManager.splitToolName("ab") == nil)
        #expect(MCPServerManager.splitToolName("ü__ö")! == ("ü", "ö"))
    }

    @Test func theRestartPolicyDoublesToItsCeilingWithJitter() {
        let policy = MCPRestartPolicy(initial: .seconds(1), maximum: .seconds(60), stable: .seconds(60))
        #expect(policy.ceiling(afterFailures: 1) == .seconds(1))
        #expect(policy.ceiling(afterFailures: 2) == .seconds(2))
        #expect(policy.ceiling(afterFailures: 7) == .seconds(60))
        #expect(policy.ceiling(afterFailures: 1000) == .seconds(60))
        #expect(policy.ceiling(afterFailures: .max) == .seconds(60))
        #expect(policy.delay(afterFailures: 3, unit: 0) == .seconds(2))
        #expect(policy.delay(afterFailures: 3, unit: 1) == .seconds(4))
    }

    @Test func schemasAreReducedToTypePropertiesAndRequired() throws {
        let schema = try JSONValue.parseWhole(Array(#"{"type":"object","properties":{},"required":[],"$defs":{"x":1},"additionalProperties":false}"#.utf8))
        #expect(MCPSchemaReduction.reduce(schema) == .object([("type", .string("object")), ("properties", .object([]))]))
        #expect(MCPSchemaReduction.reduce(.object([("$defs", .null)])) == nil)
        #expect(MCPSchemaReduction.reduce(.string("x")) == nil)
    }

    /// As the reference's `toolInputSchemaMap`: `type` is kept only as a non-empty string
    /// (an empty one, an array of types or a number is dropped, and a schema left with
    /// nothing is nil).
    @Test func aTypeIsKeptOnlyAsANonEmptyString() throws {
        func reduced(_ json: String) throws -> JSONValue? {
            let schema = try JSONValue.parseWhole(Array(json.utf8))
            return MCPSchemaReduction.reduce(schema)
        }
        #expect(try reduced(#"{"type":""}"#) == nil)
        #expect(try reduced(#"{"type":["a"]}"#) == nil)
        #expect(try reduced(#"{"type":7,"properties":{}}"#) == .object([("properties", .object([]))]))
        #expect(try reduced(#"{"type":["object","null"],"required":["a"]}"#) == .object([("required", .array([.string("a")]))]))
        #expect(try reduced(#"{"type":"object"}"#) == .object([("type", .string("object"))]))
    }
}
