import AgentTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Two agents on one host with the same socket path: the second says which agent holds the
/// path and how to choose another, and a command the second agent started never talks to the
/// first agent's socket by accident (it fails, naming both).
@Suite(.timeLimit(.minutes(3)))
struct SecondAgentSocketTests {
    /// Runs `command` through `port`'s process API; its output.
    static func run(_ command: String, port: Int) async throws -> String {
        let client = RawHTTPClient(port: port)
        let body = try JSONSerialization.data(withJSONObject: ["command": command])
        let start = try await client.request("POST", "/api/v0/processes/start", body: Array(body))
        let id = try #require(jsonObject(start.body)?["id"] as? String, "\(start)")
        let out = try await client.request("GET", "/api/v0/processes/\(id)/output?wait=true")
        return jsonObject(out.body)?["output"] as? String ?? "\(out)"
    }

    @Test func theSecondAgentNamesTheHolderAndItsCommandsDoNotCrossOver() async throws {
        let directory = NSTemporaryDirectory() + "second-agent-\(UUID().uuidString.prefix(8))"
        let socket = directory + "/agent.sock"
        let first = try AgentDaemon.launch(["--http-address", "127.0.0.1:0", "--socket-path", socket])
        defer { first.cleanup() }
        let firstPort = try await first.port()
        #expect(await eventually { first.log.contains("agent socket listening") }, "log:\n\(first.log)")

        let second = try AgentDaemon.launch(["--http-address", "127.0.0.1:0", "--socket-path", socket])
        defer { second.cleanup() }
        let secondPort = try await second.port()
        #expect(await eventually { second.log.contains("failed to create socket server") }, "log:\n\(second.log)")
        #expect(second.log.contains("another agent (pid \(first.pid)) is listening on it"), "log:\n\(second.log)")
        #expect(second.log.contains("--socket-path"), "log:\n\(second.log)")

        let ping = "\(AgentDaemon.binaryPath) exp sync ping --socket-path \(socket) 2>&1; echo status=$?"
        // The first agent's own command reaches it.
        let own = try await Self.run(ping, port: firstPort)
        #expect(own.contains("Success") && own.contains("status=0"), "\(own)")
        // The second agent's command is refused before it sends anything.
        let crossed = try await Self.run(ping, port: secondPort)
        #expect(crossed.contains("is served by another agent (pid \(first.pid))"), "\(crossed)")
        #expect(crossed.contains("not the agent that started this command (pid \(second.pid))"), "\(crossed)")
        #expect(!crossed.contains("status=0"), "\(crossed)")
        // The second one's units never reach the first: nothing was registered there.
        let list = try await Self.run("\(AgentDaemon.binaryPath) exp sync start crossed --socket-path \(socket) 2>&1", port: secondPort)
        #expect(list.contains("another agent"), "\(list)")
        let units = try await Self.run("\(AgentDaemon.binaryPath) exp sync list --socket-path \(socket) 2>&1", port: firstPort)
        #expect(units == "No units registered\n", "\(units)")
        try? FileManager.default.removeItem(atPath: directory)
    }
}
