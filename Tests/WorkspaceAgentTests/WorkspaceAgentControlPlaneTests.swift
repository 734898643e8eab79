import AgentProto
import AgentTestSupport
import ControlPlaneDouble
import Foundation
import Synchronization
import Testing

/// The real binary against the in-process control-plane double.
@Suite(.timeLimit(.minutes(2)))
struct WorkspaceAgentControlPlaneTests {
    /// Connects, reports CREATED → STARTING → READY, feeds the manifest into process
    /// environments and directories, survives the double dropping it, and on SIGTERM
    /// reports SHUTTING_DOWN and OFF exactly once.
    @Test func agentConnectsReportsLifecycleAndFeedsTheManifest() async throws {
        let workdir = NSTemporaryDirectory() + "agent-manifest-dir-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: workdir, withIntermediateDirectories: true)
        var manifest = ControlPlaneDouble.defaultManifest
        manifest.directory = workdir
        manifest.environmentVariables = ["FROM_MANIFEST": "yes", "DERIVED": "$CODER_WORKSPACE_NAME-x"]
        let double = ControlPlaneDouble(manifest: manifest)
        let tokenFile = NSTemporaryDirectory() + "agent-token-\(UUID().uuidString)"
        try TestFile.write(tokenFile, (double.token + "\n"), atomically: true)
        try await double.run { url in
            let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0", "--agent-url", url, "--agent-token-file", tokenFile])
            defer { agent.cleanup() }
            let client = RawHTTPClient(port: try await agent.port())
            #expect(await eventually(timeout: .seconds(30)) { double.recorded.withLock { $0.lifecycle.count } == 2 })
            #expect(double.recorded.withLock { $0.lifecycle } == [.starting, .ready])
            #expect(double.recorded.withLock { $0.startups.first?.version } == "v0.1.0")
            #expect(!agent.log.contains(double.token))

            let start = try await client.request(
                "POST", "/api/v0/processes/start",
                json: #"{"command":"pwd; printenv CODER CODER_WORKSPACE_NAME CODER_WORKSPACE_AGENT_NAME CODER_WORKSPACE_OWNER_NAME FROM_MANIFEST DERIVED"}"#)
            let id = try #require(jsonObject(start.body)?["id"] as? String)
            let out = try await client.request("GET", "/api/v0/processes/\(id)/output?wait=true")
            #expect(jsonObject(out.body)?["output"] as? String == "\(workdir)\ntrue\nws\nmain\nalice\nyes\nws-x\n")

            await double.dropConnections()
            #expect(await eventually(timeout: .seconds(30)) { double.recorded.withLock { $0.manifests } >= 2 })

            agent.signal(SIGTERM)
            #expect(await agent.exitStatus() == 0, "\(agent.log)")
            #expect(double.recorded.withLock { $0.lifecycle } == [.starting, .ready, .shuttingDown, .off], "\(agent.log)")
        }
    }

    /// An SSH session's CONNECT and DISCONNECT reach the control plane (ReportConnection),
    /// with the session's type, the client's address and the exit status.
    @Test func sshSessionsAreReportedUpward() async throws {
        let double = ControlPlaneDouble(manifest: Coder_Agent_V2_Manifest())
        let tokenFile = NSTemporaryDirectory() + "agent-token-\(UUID().uuidString)"
        try TestFile.write(tokenFile, (double.token + "\n"), atomically: true)
        defer { unlink(tokenFile) }
        try await double.run { url in
            let agent = try AgentDaemon.launch([
                "--http-address", "127.0.0.1:0", "--agent-url", url, "--agent-token-file", tokenFile, "--ssh-address", "127.0.0.1:0",
                "--log-level", "info",
            ])
            defer { agent.cleanup() }
            _ = try await agent.port()
            let sshPort = await agent.sshPort()
            #expect(!sshPort.isEmpty)
            let ssh = await ChildProgram.run([
                "ssh", "-F", "/dev/null", "-p", sshPort, "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", "SetEnv=CODER_SSH_SESSION_TYPE=vscode", "127.0.0.1", "exit 3",
            ])
            #expect(ssh.status == 3)
            #expect(await eventually(timeout: .seconds(30)) { double.recorded.withLock { $0.connectionReports.count } == 2 })
            let reports = double.recorded.withLock { $0.connectionReports }
            #expect(reports.map(\.action) == [.connect, .disconnect])
            #expect(reports.allSatisfy { $0.type == .vscode && $0.ip == "127.0.0.1" && $0.id.count == 16 })
            #expect(Set(reports.map(\.id)).count == 1, "CONNECT and DISCONNECT share one id")
            #expect(reports.last?.statusCode == 3 && reports.last?.reason == "process exited with error status: 3", "\(reports)")
        }
    }

    @Test func urlWithoutTokenIsAUsageError() async throws {
        let agent = try AgentDaemon.launch(["--agent-url", "http://127.0.0.1:9"])
        defer { agent.cleanup() }
        #expect(await agent.exitStatus() == 64)
        #expect(agent.log.contains("Either CODER_AGENT_TOKEN or CODER_AGENT_TOKEN_FILE must be set"), "\(agent.log)")
    }
}

/// SIGTERM while the control-plane dial is pending (a server that accepts and never
/// answers the upgrade) used to end through the watchdog with status 1.
@Suite(.timeLimit(.minutes(3)))
struct WorkspaceAgentPendingDialTests {
    @Test func sigtermDuringAPendingDialExitsCleanly() async throws {
        // Listens, never accepts: the kernel completes the TCP handshake, nobody answers.
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #expect(listener >= 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        #expect(bound == 0)
        #expect(listen(listener, 16) == 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) } }
        let port = Int(UInt16(bigEndian: address.sin_port))

        let agent = try AgentDaemon.launch(
            ["--http-address", "127.0.0.1:0", "--agent-url", "http://127.0.0.1:\(port)"], environment: ["CODER_AGENT_TOKEN": "t0ken"])
        defer { agent.cleanup() }
        _ = try await agent.port()
        // The dial is under way (its own timeout is 30 s).
        try await Task.sleep(for: .milliseconds(500))
        agent.signal(SIGTERM)
        #expect(await agent.exitStatus() == 0, "\(agent.log)")
        #expect(!agent.log.contains("did not finish"), "\(agent.log)")
    }
}
