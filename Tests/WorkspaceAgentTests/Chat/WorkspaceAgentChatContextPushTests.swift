import AgentProto
import AgentTestSupport
import ControlPlaneDouble
import Foundation
import Synchronization
import Testing

/// PushContextState from the real binary to the control-plane double: nothing before the
/// startup scripts end, then an initial push, a newer version on an edit (no resync), and
/// Unimplemented ending the push for the session.
@Suite(.timeLimit(.minutes(3)))
struct WorkspaceAgentChatContextPushTests {
    @Test func firstPushAfterStartupScriptsThenEdits() async throws {
        let (home, workdir) = try WorkspaceAgentChatContextTests.home()
        defer { try? FileManager.default.removeItem(atPath: home) }
        var manifest = ControlPlaneDouble.defaultManifest
        manifest.directory = workdir
        // The start phase lasts until the test creates `go`.
        manifest.scripts = [ScriptsHarness.script("while [ ! -f \(home)/go ]; do sleep 0.05; done")]
        let double = ControlPlaneDouble(manifest: manifest)
        let tokenFile = try ScriptsHarness.tokenFile(double)
        try await double.run { url in
            let agent = try AgentDaemon.launch(
                ["--http-address", "127.0.0.1:0", "--agent-url", url, "--agent-token-file", tokenFile], environment: ["HOME": home])
            defer { agent.cleanup() }
            let client = RawHTTPClient(port: try await agent.port())
            #expect(await eventually(timeout: .seconds(60)) { ScriptsHarness.lifecycle(double).contains(.starting) }, "\(agent.log)")
            // Gated: version 0, nothing pushed, while the script runs.
            let gated = try await client.request("POST", "/api/v0/context/resync", json: "")
            #expect(jsonInt(jsonObject(gated.body)?["version"]) == 0, "\(gated)")
            #expect(double.contextState.withLock { $0.pushes.isEmpty })

            try TestFile.write(home + "/go", [UInt8]())
            #expect(await eventually(timeout: .seconds(60)) { !double.contextState.withLock { $0.pushes.isEmpty } }, "\(agent.log)")
            // READY travels apart from the push (behind any report in flight): waited for too.
            #expect(await eventually(timeout: .seconds(60)) { ScriptsHarness.lifecycle(double).contains(.ready) })
            let first = try #require(double.contextState.withLock { $0.pushes.first })
            #expect(first.initial && first.version >= 1)
            let agents = first.resources.first { $0.source == workdir + "/AGENTS.md" }
            #expect(agents?.status == .ok && agents?.instructionFile.content == Data("# Project rules\nbe kind\n".utf8))

            // An edit reaches the control plane as a newer, non-initial version.
            try TestFile.write(workdir + "/AGENTS.md", "# Project rules\nbe kinder\n", atomically: true)
            #expect(
                await eventually(timeout: .seconds(60)) {
                    double.contextState.withLock { state in
                        state.stored.map { stored in
                            stored.version > first.version && stored.resources.contains { $0.instructionFile.content == Data("# Project rules\nbe kinder\n".utf8) }
                        } ?? false
                    }
                }, "\(agent.log)")
            let state = double.contextState.withLock { $0 }
            #expect(state.rejections.isEmpty, "\(state.rejections)")
            #expect(state.pushes.dropFirst().allSatisfy { !$0.initial })
            agent.signal(SIGTERM)
            #expect(await agent.exitStatus() == 0, "\(agent.log)")
        }
    }

    @Test func unimplementedStopsThePush() async throws {
        let (home, workdir) = try WorkspaceAgentChatContextTests.home()
        defer { try? FileManager.default.removeItem(atPath: home) }
        var manifest = ControlPlaneDouble.defaultManifest
        manifest.directory = workdir
        let double = ControlPlaneDouble(manifest: manifest)
        double.contextState.withLock { $0.unimplemented = true }
        let tokenFile = try ScriptsHarness.tokenFile(double)
        try await double.run { url in
            let agent = try AgentDaemon.launch(
                ["--http-address", "127.0.0.1:0", "--agent-url", url, "--agent-token-file", tokenFile], environment: ["HOME": home])
            defer { agent.cleanup() }
            let client = RawHTTPClient(port: try await agent.port())
            func metric(_ line: String) async throws -> Double? {
                let text = try await client.request("GET", "/metrics").bodyText
                return text.split(separator: "\n").first { $0.hasPrefix(line + " ") }.flatMap { Double($0.split(separator: " ").last!) }
            }
            let unimplemented = #"agent_chat_context_pushes_total{outcome="unimplemented"}"#
            // The version gauge is set just after the snapshot is pushed: both waited for, so
            // that the edit below is what moves it.
            #expect(
                try await eventually(timeout: .seconds(60)) {
                    let pushed = try await metric(unimplemented) == 1
                    let version = try await metric("agent_chat_context_version") ?? 0
                    return pushed && version >= 1
                }, "\(agent.log)")
            let version = try #require(try await metric("agent_chat_context_version"))
            // A later snapshot is not pushed on this session.
            try TestFile.write(workdir + "/AGENTS.md", "# Project rules\nchanged\n", atomically: true)
            #expect(try await eventually(timeout: .seconds(60)) { (try await metric("agent_chat_context_version") ?? 0) > version })
            #expect(try await metric(unimplemented) == 1)
            #expect(try await metric(#"agent_chat_context_pushes_total{outcome="error"}"#) == nil)
            agent.signal(SIGTERM)
            #expect(await agent.exitStatus() == 0, "\(agent.log)")
        }
    }
}
