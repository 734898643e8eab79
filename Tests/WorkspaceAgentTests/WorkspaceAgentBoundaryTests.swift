import AgentProto
import AgentTestSupport
import ControlPlaneDouble
import Foundation
import SwiftProtobuf
import Synchronization
import Testing

/// The boundary log proxy in the real binary: its socket, and its metrics as a real
/// Prometheus parser reads them (names and labels exactly as the reference's).
@Suite(.serialized, .timeLimit(.minutes(3)))
struct WorkspaceAgentBoundaryTests {
    /// Connects to the agent's boundary socket once it listens.
    static func connect(_ path: String) async throws -> LoopbackSocket {
        var connected: LoopbackSocket?
        #expect(
            await eventually {
                connected = LoopbackSocket(unixPath: path)
                return connected != nil
            })
        return try #require(connected)
    }

    /// Every sample as `name{label="value"}` → value, read by prometheus_client's parser.
    static func samples(_ text: String) async -> [String: Double] {
        let script = """
            import sys
            from prometheus_client.parser import text_string_to_metric_families
            for family in text_string_to_metric_families(sys.stdin.read()):
                for s in family.samples:
                    labels = ",".join('%s="%s"' % (k, v) for k, v in sorted(s.labels.items()))
                    print("%s{%s} %s" % (s.name, labels, s.value))
            """
        let outcome = await ChildProgram.run(["/usr/bin/python3", "-c", script], input: text)
        let output = outcome.status == 0 ? outcome.stdout : ""
        var samples: [String: Double] = [:]
        for line in output.split(separator: "\n") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            samples[String(line[..<space])] = value
        }
        return samples
    }

    @Test func statusCountsAndLoggedBatchesStandalone() async throws {
        let path = NSTemporaryDirectory() + "boundary-\(UUID().uuidString.prefix(8)).sock"
        let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0", "--boundary-log-proxy-socket-path", path])
        defer { agent.cleanup() }
        let client = RawHTTPClient(port: try await agent.port())
        let socket = try await Self.connect(path)
        let permissions = (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue
        #expect(permissions == 0o600, "the socket is private")
        // Skipped frames count too (an undecodable body, two empty envelopes), before the logs.
        socket.send(
            Boundary.frame(tag: 1, [0xFF, 0xFF, 0xFF, 0xFF]) + Boundary.frame(tag: 2, []) + Boundary.frame(tag: 2, [])
                + Boundary.status(channelFull: 5, batchFull: 3) + Boundary.status(channelFull: 0, batchFull: -1) + Boundary.logs(2))
        var samples: [String: Double] = [:]
        #expect(
            await eventually {
                samples = await Self.samples((try? await client.request("GET", "/metrics").bodyText) ?? "")
                return samples["agent_boundary_log_proxy_batches_logged_total{}"] == 1
            })
        #expect(samples[#"agent_boundary_log_proxy_logs_dropped_total{reason="boundary_channel_full"}"#] == 5)
        #expect(samples[#"agent_boundary_log_proxy_logs_dropped_total{reason="boundary_batch_full"}"#] == 3)
        #expect(samples[#"agent_boundary_log_proxy_frames_skipped_total{reason="undecodable"}"#] == 1, "\(samples)")
        #expect(samples[#"agent_boundary_log_proxy_frames_skipped_total{reason="empty"}"#] == 2, "\(samples)")
        #expect(!samples.keys.contains { $0.hasPrefix("agent_boundary_log_proxy_batches_dropped_total") && $0.contains("boundary_") })
        agent.signal(SIGTERM)
        #expect(await agent.exitStatus() == 0)
        #expect(!FileManager.default.fileExists(atPath: path), "removed at shutdown")
    }

    /// With no spool (the reference's behaviour) and a control plane that cannot be reached,
    /// batches past the 100 waiting are dropped as `buffer_full`; reading never blocks.
    @Test func aFullBufferWithoutSpoolDropsAndCounts() async throws {
        let path = NSTemporaryDirectory() + "boundary-\(UUID().uuidString.prefix(8)).sock"
        let unreachable = "http://127.0.0.1:\(freeLoopbackPort())"
        let agent = try AgentDaemon.launch(
            [
                "--http-address", "127.0.0.1:0", "--boundary-log-proxy-socket-path", path, "--boundary-log-spool-size", "0",
                "--agent-url", unreachable,
            ],
            environment: ["CODER_AGENT_TOKEN": "not-a-real-token"])
        defer { agent.cleanup() }
        let client = RawHTTPClient(port: try await agent.port())
        let socket = try await Self.connect(path)
        // The request in flight takes at most what was queued (100), the queue holds 100 more:
        // of 300, at least 100 are dropped.
        var bytes: [UInt8] = []
        for _ in 0..<300 { bytes += Boundary.logs(1) }
        #expect(socket.send(bytes))
        var samples: [String: Double] = [:]
        #expect(
            await eventually {
                samples = await Self.samples((try? await client.request("GET", "/metrics").bodyText) ?? "")
                // Both: a scrape may come between a drop's two counters.
                return (samples[#"agent_boundary_log_proxy_batches_dropped_total{reason="buffer_full"}"#] ?? 0) >= 1
                    && (samples[#"agent_boundary_log_proxy_logs_dropped_total{reason="buffer_full"}"#] ?? 0) >= 1
            }, "\(samples.filter { $0.key.contains("dropped") })")
    }

    /// Beyond the reference: what the agent still held at shutdown (the control plane was
    /// away) is spooled under the state directory and sent by the next agent.
    @Test func logsHeldAtShutdownArriveAfterTheNextStart() async throws {
        let state = NSTemporaryDirectory() + "boundary-state-\(UUID().uuidString.prefix(8))"
        let path = NSTemporaryDirectory() + "boundary-\(UUID().uuidString.prefix(8)).sock"
        defer { try? FileManager.default.removeItem(atPath: state) }
        let double = ControlPlaneDouble()
        // Free a moment ago (a random port could be an ephemeral one in use).
        let port = freeLoopbackPort()
        let arguments = [
            "--http-address", "127.0.0.1:0", "--state-dir", state, "--boundary-log-proxy-socket-path", path,
            "--agent-url", "http://127.0.0.1:\(port)",
        ]
        let first = try AgentDaemon.launch(arguments, environment: ["CODER_AGENT_TOKEN": double.token])
        defer { first.cleanup() }
        let client = RawHTTPClient(port: try await first.port())
        let socket = try await Self.connect(path)
        var request = Coder_Agent_V2_ReportBoundaryLogsRequest()
        request.sessionID = "0f0e0d0c-0b0a-4908-8706-050403020100"
        var bytes: [UInt8] = []
        for sequence in 0..<300 {
            var log = Coder_Agent_V2_BoundaryLog()
            var http = Coder_Agent_V2_BoundaryLog.HttpRequest()
            http.url = "https://restart.invalid/\(sequence)"
            log.httpRequest = http
            log.sequenceNumber = Int32(sequence)
            request.logs = [log]
            bytes += Boundary.frame(tag: 1, try request.serializedBytes())
        }
        #expect(socket.send(bytes))
        // Every frame read before the shutdown (one still unread when the connection closes
        // is the sender's to resend).
        #expect(
            await eventually(timeout: .seconds(60)) {
                let samples = await Self.samples((try? await client.request("GET", "/metrics").bodyText) ?? "")
                return samples["agent_boundary_log_proxy_batches_received_total{}"] == 300
            })
        first.signal(SIGTERM)
        #expect(await first.exitStatus() == 0)

        try await double.run(port: port) { _ in
            let second = try AgentDaemon.launch(arguments, environment: ["CODER_AGENT_TOKEN": double.token])
            defer { second.cleanup() }
            #expect(
                await eventually(timeout: .seconds(30)) {
                    double.recorded.withLock { $0.boundaryLogs.reduce(0) { $0 + $1.logs.count } } >= 300
                })
            let numbers = double.recorded.withLock { $0.boundaryLogs.flatMap { $0.logs.map(\.sequenceNumber) } }
            #expect(numbers == (0..<300).map { Int32($0) }, "each once, in order")
            second.signal(SIGTERM)
            #expect(await second.exitStatus() == 0)
        }
    }
}
