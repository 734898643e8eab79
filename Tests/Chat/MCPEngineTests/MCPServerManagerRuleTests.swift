import AgentCore
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
