import AgentTestSupport
import Foundation
import Testing

/// The chat → paths store survives a restart (beyond the reference): the real binary saves
/// it under its state directory and restores it.
@Suite(.timeLimit(.minutes(3)))
struct WorkspaceAgentChatPathsTests {
    @Test func aChatsPathsAreSavedUnderTheStateDirectory() async throws {
        let state = NSTemporaryDirectory() + "agent-state-\(UUID().uuidString.prefix(8))"
        let workdir = NSTemporaryDirectory() + "agent-workdir-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: workdir, withIntermediateDirectories: true)
        let chat = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
        let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0", "--state-dir", state])
        defer { agent.cleanup() }
        let client = RawHTTPClient(port: try await agent.port())
        let started = try await client.request(
            "POST", "/api/v0/processes/start", headers: [("Coder-Chat-Id", chat)], json: "{\"command\":\"true\",\"workdir\":\"\(workdir)\"}")
        #expect(started.status == 200)
        let id = try #require(jsonObject(started.body)?["id"] as? String)
        _ = try await client.request("GET", "/api/v0/processes/\(id)/output?wait=true", headers: [("Coder-Chat-Id", chat)])
        agent.signal(SIGTERM)
        #expect(await agent.exitStatus() == 0)
        let saved = try String(contentsOfFile: state + "/chat-paths.json", encoding: .utf8)
        #expect(saved.contains(chat) && saved.contains(URL(fileURLWithPath: workdir).standardizedFileURL.path.split(separator: "/").last.map(String.init) ?? "?"))

        // A second agent on the same state directory keeps it (and saves it again at exit).
        let second = try AgentDaemon.launch(["--http-address", "127.0.0.1:0", "--state-dir", state])
        defer { second.cleanup() }
        _ = try await second.port()
        second.signal(SIGTERM)
        #expect(await second.exitStatus() == 0)
        #expect(try String(contentsOfFile: state + "/chat-paths.json", encoding: .utf8).contains(chat))
    }
}
