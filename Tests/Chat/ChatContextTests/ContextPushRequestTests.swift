import AgentCore
import AgentProto
import AgentTestSupport
@testable import ChatContext
import ControlPlaneDouble
import Foundation
import Testing

/// A push is always one coderd accepts: texts cut and redacted, sources unique and bounded,
/// bodies within coderd's caps (checked with the double's copy of coderd's validation).
struct ContextPushRequestTests {
    @Test(.ownThreads) func hostileSnapshotStillPasses() throws {
        let secret = "sk-live-0123456789"
        let huge = String(repeating: "é", count: 600_000)  // 1.2 MB of two-byte characters
        var resources: [ContextResource] = [
            ContextResource(kind: .mcpConfig, source: "/w/.mcp.json#srv", status: .invalid, error: "token \(secret) " + huge),
            ContextResource(kind: .instructionFile, source: "/w/AGENTS.md", payload: Array("hi".utf8)),
            ContextResource(kind: .skill, source: "/w/AGENTS.md", name: "dup"),
            ContextResource(kind: .instructionFile, source: "/" + String(repeating: "x", count: 2000)),
            ContextResource(kind: .mcpServer, source: String(repeating: "n", count: 900), name: String(repeating: "n", count: 3000)),
        ]
        for index in 0..<1200 { resources.append(ContextResource(kind: .skill, source: "/w/skills/s\(index)", name: "s\(index)")) }
        // Bodies of 200 KiB each: 4 MiB in all runs out after about 20 of them.
        for index in 0..<30 {
            resources.append(ContextResource(kind: .instructionFile, source: "/big/\(index)", payload: [UInt8](repeating: 0x61, count: 200 << 10)))
        }
        let snapshot = ContextSnapshot(version: 3, resources: resources, snapshotError: "bad \(secret) " + huge)
        let request = ContextPushRequest.make(snapshot, initial: true, redactor: ContextRedactor(secrets: [secret]))
        #expect(ControlPlaneDouble.contextPushProblem(request) == nil)
        #expect(request.snapshotError.utf8.count <= 4096 && request.snapshotError.hasSuffix("... [truncated]"))
        #expect(!request.snapshotError.contains(secret) && request.snapshotError.contains("[redacted]"))
        let row = try #require(request.resources.first { $0.source == "/w/.mcp.json#srv" })
        #expect(row.error.utf8.count <= 4096 && !row.error.contains(secret))
        #expect(request.resources.count == 1000)
        #expect(Set(request.resources.map(\.source)).count == request.resources.count)
        #expect(request.resources.contains { $0.status == .excluded && $0.error.contains("4194304-byte total") } || request.resources.count == 1000)
    }

    @Test(.ownThreads) func bigBodiesAreExcluded() throws {
        var resources: [ContextResource] = []
        for index in 0..<30 {
            resources.append(ContextResource(kind: .instructionFile, source: "/big/\(index)", payload: [UInt8](repeating: 0x61, count: 150 << 10)))
        }
        resources.append(ContextResource(kind: .skill, source: "/huge", payload: [UInt8](repeating: 0x61, count: 300 << 10)))
        let request = ContextPushRequest.make(ContextSnapshot(version: 1, resources: resources), initial: false, redactor: ContextRedactor())
        #expect(ControlPlaneDouble.contextPushProblem(request) == nil)
        let huge = try #require(request.resources.first { $0.source == "/huge" })
        #expect(huge.status == .excluded && huge.skill.meta.isEmpty)
        #expect(request.resources.contains { $0.status == .excluded && $0.error.contains("4194304-byte total") })
    }

    /// The secret-bearing fields, whole, 8 bytes and more; positional arguments, the URL's
    /// path and short values are kept (see ContextRedactor).
    @Test func redactsMCPEntrySecrets() {
        let server = MCPServerConfig(
            name: "gh", transport: "http", command: "", args: ["--token=abcd1234", "-v", "positional-secret"],
            env: ["KEY": "envsecret"], url: "https://user:pa55word@host/p4th?k=v4lue", headers: ["Authorization": "Bearer t0ken123"])
        let redactor = ContextRedactor().adding(servers: [server])
        let text = redactor.scrub("abcd1234 positional-secret envsecret pa55word p4th v4lue t0ken123 -v")
        #expect(text == "[redacted] positional-secret [redacted] [redacted] p4th v4lue [redacted] -v", "\(text)")
    }
}
