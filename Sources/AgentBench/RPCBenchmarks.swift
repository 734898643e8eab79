import AgentProto
import AgentRPC
import ArgumentParser
import ControlPlaneDouble
import Foundation
import HummingbirdWSClient
import Logging
import NIOCore
import NIOWebSocket
import SwiftProtobuf
import Synchronization
import Yamux

/// `agent-bench rpc`: unary calls through WebSocket + yamux + dRPC against the
/// control-plane double, against a raw WebSocket round trip on the same loopback server.
struct RPCBenchmarks: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rpc",
        abstract: "Upward RPC: unary round trip and 1 MiB throughput vs a raw WebSocket."
    )

    @Option(help: "Round trips per side.")
    var iterations = 2000

    @Option(help: "1 MiB messages per side in the throughput run.")
    var messages = 64

    func run() async throws {
        let quiet = Logger(label: "bench", factory: { _ in SwiftLogNoOpLogHandler() })
        let double = ControlPlaneDouble()
        let iterations = self.iterations
        let messages = self.messages
        try await double.run { url in
            // RPC side: one yamux session, a fresh stream per call, as the agent does.
            let (rpcRTT, rpcRate) = try await Self.measureRPC(url: url, token: double.token, iterations: iterations, messages: messages, logger: quiet)
            let (wsRTT, wsRate) = try await Self.measureRawWebSocket(url: url, iterations: iterations, messages: messages, logger: quiet)
            print("agent-bench rpc: \(iterations) round trips, \(messages) x 1 MiB per side")
            report("unary RPC round trip (median)", value: Bench.format(rpcRTT), baseline: Bench.format(wsRTT),
                   ratio: rpcRTT / wsRTT, goal: "<= 1.3x raw WebSocket echo", met: rpcRTT / wsRTT <= 1.3)
            report("1 MiB messages upward", value: String(format: "%.0f MiB/s", rpcRate), baseline: String(format: "%.0f MiB/s", wsRate),
                   ratio: rpcRate / wsRate, goal: ">= 0.7x raw WebSocket", met: rpcRate / wsRate >= 0.7)
        }
    }

    static func measureRPC(url: String, token: String, iterations: Int, messages: Int, logger: Logger) async throws -> (Double, Double) {
        let dialer = WebSocketDialer(baseURL: url, token: token, version: "2.10", logger: logger)
        let result = Mutex<(Double, Double)>((0, 0))
        let writer = WriterTransport()
        let session = YamuxSession(role: .client, transport: writer)
        await session.start()
        try await dialer.connect(
            onBytes: { await session.receive($0) },
            onClosed: { await session.transportClosed() }
        ) { write in
            writer.set(write)
            let api = AgentAPIClient(session: session)
            var lifecycle = Coder_Agent_V2_Lifecycle()
            lifecycle.state = .ready
            lifecycle.changedAt = .init(seconds: 1_700_000_000)
            for _ in 0..<100 { _ = try await api.updateLifecycle(lifecycle) }
            var samples: [Double] = []
            for _ in 0..<iterations {
                let t0 = Bench.now()
                _ = try await api.updateLifecycle(lifecycle)
                samples.append(Double(Bench.now() - t0))
            }
            var big = Coder_Agent_V2_ReportBoundaryLogsRequest()
            big.sessionID = String(repeating: "x", count: (1 << 20) - 8)
            let t0 = Bench.now()
            for _ in 0..<messages { try await api.reportBoundaryLogs(big) }
            let seconds = Double(Bench.now() - t0) / 1e9
            result.withLock { $0 = (Bench.median(samples), Double(messages) / seconds) }
            await session.close()
        }
        return result.withLock { $0 }
    }

    static func measureRawWebSocket(url: String, iterations: Int, messages: Int, logger: Logger) async throws -> (Double, Double) {
        let result = Mutex<(Double, Double)>((0, 0))
        let wsURL = url.replacingOccurrences(of: "http://", with: "ws://") + "/echo"
        try await WebSocketClient.connect(url: wsURL, configuration: .init(maxFrameSize: 4 << 20), logger: logger) { inbound, outbound, _ in
            var iterator = inbound.messages(maxSize: 4 << 20).makeAsyncIterator()
            let small = ByteBuffer(bytes: [UInt8](repeating: 7, count: 27)) // an Invoke+Message+CloseSend's worth
            for _ in 0..<100 {
                try await outbound.write(.binary(small))
                _ = try await iterator.next()
            }
            var samples: [Double] = []
            for _ in 0..<iterations {
                let t0 = Bench.now()
                try await outbound.write(.binary(small))
                _ = try await iterator.next()
                samples.append(Double(Bench.now() - t0))
            }
            let big = ByteBuffer(bytes: [UInt8](repeating: 1, count: 1 << 20))
            let t0 = Bench.now()
            for _ in 0..<messages {
                try await outbound.write(.binary(big))
                _ = try await iterator.next()
            }
            let seconds = Double(Bench.now() - t0) / 1e9
            result.withLock { $0 = (Bench.median(samples), Double(messages) / seconds) }
            try await outbound.close(.normalClosure, reason: nil)
        }
        return result.withLock { $0 }
    }
}

