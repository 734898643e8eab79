import AgentCore
import AgentProto
import ArgumentParser
import ControlPlaneDouble
import Foundation
import SwiftProtobuf
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// `agent-bench boundary`: several boundary-style clients write batches of 10 audit logs to
/// the release agent's socket as fast as they can; the agent forwards them to the in-process
/// control-plane double. Reported: logs per second end to end with zero drops, against the
/// rate at which the same clients write the same frames into a unix socket that only reads
/// them (the raw write rate), and the agent's peak RSS while its spool absorbs the burst.
struct BoundaryBenchmarks: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "boundary", abstract: "Boundary logs: sustained forwarding rate.")

    @Option(help: "Path of the workspace-agent binary (default: next to agent-bench).")
    var agent: String?
    @Option(help: "Concurrent boundary clients.") var clients = 4
    @Option(help: "Batches (10 logs each) per client.") var batches = 5000

    func run() async throws {
        let binary = try Bench.agentBinary(agent)
        let double = ControlPlaneDouble(keepsPayloads: true)
        let (clients, batches) = (self.clients, self.batches)
        let directory = NSTemporaryDirectory() + "agent-bench-boundary-\(getpid())"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let frames = (0..<clients).map { Self.frames(client: $0, batches: batches) }
        let total = clients * batches

        // Baseline: the same writes into a socket that reads and discards.
        let sinkPath = directory + "/sink.sock"
        let sink = try EchoServer(path: sinkPath, discard: true)
        defer { sink.stop() }
        let rawNs = await Self.write(frames, to: sinkPath)
        let rawRate = Double(total * 10) / (Double(rawNs) / 1e9)

        try await double.run { url in
            let socketPath = directory + "/audit.sock"
            let port = Bench.freePort()
            let pid = Bench.spawn(
                [
                    binary, "--http-address", "127.0.0.1:\(port)", "--state-dir", directory + "/state", "--log-level", "error",
                    "--prometheus-address", "", "--socket-server-enabled", "false", "--agent-url", url,
                    "--agent-token-file", try Self.tokenFile(double.token, in: directory),
                    "--boundary-log-proxy-socket-path", socketPath,
                ],
                stdoutPath: directory + "/agent.log")
            defer {
                kill(pid, SIGTERM)
                _ = Bench.wait(pid)
            }
            for _ in 0..<400 where !(FileManager.default.fileExists(atPath: socketPath) && double.recorded.withLock { $0.connections } > 0) {
                usleep(25_000)
            }
            let sampler = PeakSampler(pid: pid)
            let before = Bench.rss(pid)
            sampler.start()
            let start = Bench.now()
            _ = await Self.write(frames, to: socketPath)
            // Logs, not requests: the agent sends consecutive batches of a session together.
            var delivered = 0
            var requests = 0
            for _ in 0..<12_000 {
                (delivered, requests) = double.recorded.withLock { ($0.boundaryLogs.reduce(0) { $0 + $1.logs.count }, $0.boundaryLogs.count) }
                if delivered >= total * 10 { break }
                usleep(5_000)
            }
            let elapsed = Double(Bench.now() - start)
            let peak = sampler.stop()
            let rate = Double(delivered) / (elapsed / 1e9)
            print("agent-bench boundary: \(clients) clients x \(batches) batches of 10 logs (\(total * 10) logs)")
            report(
                "logs forwarded end to end", value: String(format: "%.0f logs/s", rate), baseline: String(format: "%.0f logs/s", rawRate),
                ratio: rate / rawRate, goal: ">= 50000 logs/s, none lost", met: rate >= 50_000 && delivered == total * 10)
            report(
                "logs delivered (in \(requests) requests)", value: "\(delivered)", baseline: "\(total * 10)",
                ratio: Double(delivered) / Double(total * 10), goal: "all of them", met: delivered == total * 10)
            report(
                "agent RSS growth during the burst", value: Bench.mib(max(0, peak - before)), baseline: Bench.mib(before),
                ratio: Double(max(0, peak - before)) / Double(max(1, before)), goal: "reported (the spool is on disk)", met: true)
        }
    }

    static func tokenFile(_ token: String, in directory: String) throws -> String {
        let path = directory + "/token"
        try Data(token.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// One client's frames: TagV2 envelopes of 10 logs each, numbered per session.
    static func frames(client: Int, batches: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        let session = UUID().uuidString.lowercased()
        for batch in 0..<batches {
            var request = Coder_Agent_V2_ReportBoundaryLogsRequest()
            request.sessionID = session
            request.logs = (0..<10).map { index in
                var log = Coder_Agent_V2_BoundaryLog()
                log.allowed = index % 3 != 0
                log.time = Google_Protobuf_Timestamp(date: Date())
                var http = Coder_Agent_V2_BoundaryLog.HttpRequest()
                http.method = "GET"
                http.url = "https://registry.example.invalid/client-\(client)/package-\(batch)-\(index)"
                if log.allowed { http.matchedRule = "domain=registry.example.invalid" }
                log.httpRequest = http
                log.sequenceNumber = Int32(batch * 10 + index)
                return log
            }
            var message = Coder_Boundarylogproxy_Codec_V1_BoundaryMessage()
            message.logs = request
            let payload: [UInt8] = try! message.serializedBytes()
            bytes += [2, UInt8(payload.count >> 16), UInt8((payload.count >> 8) & 0xFF), UInt8(payload.count & 0xFF)] + payload
        }
        return bytes
    }

    /// Each client on its own thread writes its frames in 64 KiB pieces; nanoseconds for all.
    static func write(_ frames: [[UInt8]], to path: String) async -> UInt64 {
        let start = Bench.now()
        await withTaskGroup(of: Void.self) { group in
            for bytes in frames {
                group.addTask {
                    await onThread {
                        guard let fd = try? UnixSocket.connect(path).get() else { return }
                        defer { close(fd) }
                        var offset = 0
                        while offset < bytes.count {
                            let end = min(bytes.count, offset + (64 << 10))
                            guard bytes[offset..<end].withUnsafeBytes({ Bench.sendAll(fd, $0) }) else { return }
                            offset = end
                        }
                    }
                }
            }
        }
        return Bench.now() - start
    }
}
