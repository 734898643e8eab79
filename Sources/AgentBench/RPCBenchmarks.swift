import AgentProto
import AgentRPC
import ArgumentParser
import ControlPlaneDouble
import Foundation
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

    @Option(help: "Round trips per side and round.")
    var iterations = 2000

    @Option(help: "1 MiB messages per side and round in the throughput run.")
    var messages = 64

    @Option(help: "Rounds; each measures the RPC path, then the baseline, so drift of a noisy machine hits both.")
    var rounds = 3

    @Flag(help: "Measure the RPC side only, no baseline and no verdict (for a profiler).")
    var rpcOnly = false

    func run() async throws {
        let quiet = Logger(label: "bench", factory: { _ in SwiftLogNoOpLogHandler() })
        let double = ControlPlaneDouble(keepsPayloads: false)
        let (iterations, messages, rounds, rpcOnly) = (self.iterations, self.messages, max(1, self.rounds), self.rpcOnly)
        try await double.run { url in
            var rpc: [Sample] = []
            var raw: [Sample] = []
            for _ in 0..<rounds {
                // RPC side: one yamux session, a fresh stream per call, as the agent does.
                rpc.append(try await Self.measureRPC(url: url, token: double.token, iterations: iterations, messages: messages, logger: quiet))
                if rpcOnly { continue }
                raw.append(try await Self.measureRawWebSocket(url: url, iterations: iterations, messages: messages))
            }
            if rpcOnly {
                for sample in rpc {
                    print(String(format: "rpc only: round trip %@, %.0f MiB/s, CPU %@ per 1 MiB", Bench.format(sample.rtt), sample.rate, Bench.format(sample.cpuPerMessage)))
                }
                return
            }
            let rpcRTT = Bench.median(rpc.map(\.rtt)), wsRTT = Bench.median(raw.map(\.rtt))
            let rpcRate = Bench.median(rpc.map(\.rate)), wsRate = Bench.median(raw.map(\.rate))
            let rpcCPU = Bench.median(rpc.map(\.cpuPerMessage)), wsCPU = Bench.median(raw.map(\.cpuPerMessage))
            print("agent-bench rpc: \(rounds) rounds of \(iterations) round trips and \(messages) x 1 MiB per side (medians)")
            report(
                "unary RPC round trip (median)", value: Bench.format(rpcRTT), baseline: Bench.format(wsRTT),
                ratio: rpcRTT / wsRTT, goal: "<= 1.3x raw WebSocket echo", met: rpcRTT / wsRTT <= 1.3)
            report(
                "1 MiB messages upward", value: String(format: "%.0f MiB/s", rpcRate), baseline: String(format: "%.0f MiB/s", wsRate),
                ratio: rpcRate / wsRate, goal: ">= 0.7x raw WebSocket", met: rpcRate / wsRate >= 0.7)
            report(
                "  CPU per 1 MiB message (both ends)", value: Bench.format(rpcCPU), baseline: Bench.format(wsCPU),
                ratio: rpcCPU / wsCPU, goal: "(information: the echo carries it both ways)", met: true)
        }
    }

    /// One round of one side: the median round trip (ns), 1 MiB messages a second, and the
    /// process's CPU time (ns, client and server together) per 1 MiB message.
    struct Sample {
        var rtt: Double
        var rate: Double
        var cpuPerMessage: Double
    }

    static func measureRPC(url: String, token: String, iterations: Int, messages: Int, logger: Logger) async throws -> Sample {
        let dialer = WebSocketDialer(baseURL: url, token: token, version: "2.10", logger: logger)
        let session = try await dialer.dial()
        let api = AgentAPIClient(session: session)
        var lifecycle = Coder_Agent_V2_Lifecycle()
        lifecycle.state = .ready
        lifecycle.changedAt = .init(seconds: 1_700_000_000)
        var big = Coder_Agent_V2_ReportBoundaryLogsRequest()
        big.sessionID = String(repeating: "x", count: (1 << 20) - 8)
        let result = try await measure(
            iterations: iterations, messages: messages,
            small: { _ = try await api.updateLifecycle(lifecycle) },
            big: { try await api.reportBoundaryLogs(big) })
        await session.close()
        return result
    }

    /// The median of `iterations` timed `small` round trips (after 100 untimed ones), and
    /// how many `big` (1 MiB) round trips per second `messages` of them achieve.
    static func measure(
        iterations: Int, messages: Int,
        small: () async throws -> Void, big: () async throws -> Void
    ) async throws -> Sample {
        for _ in 0..<100 { try await small() }
        var samples: [Double] = []
        for _ in 0..<iterations {
            let t0 = Bench.now()
            try await small()
            samples.append(Double(Bench.now() - t0))
        }
        let t0 = Bench.now(), cpu0 = Self.processCPU()
        for _ in 0..<messages { try await big() }
        let seconds = Double(Bench.now() - t0) / 1e9
        let cpu = Double(Self.processCPU() - cpu0) / Double(max(1, messages))
        return Sample(rtt: Bench.median(samples), rate: Double(messages) / seconds, cpuPerMessage: cpu)
    }

    /// This process's CPU time in nanoseconds (all threads; /proc's clock ticks are too
    /// coarse for a run of a few tens of milliseconds).
    static func processCPU() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }

    /// The same client stack and server without yamux and dRPC: one binary message each
    /// way per round trip.
    static func measureRawWebSocket(url: String, iterations: Int, messages: Int) async throws -> Sample {
        let wsURL = url.replacingOccurrences(of: "http://", with: "ws://") + "/echo"
        let client = try await WebSocketConnector.connect(url: wsURL) { channel in
            // The same framing as the RPC path.
            let writer = try WebSocketFraming.installWriter(on: channel)
            let handler = RawWebSocketClient(channel: channel, writer: NIOLoopBound(writer, eventLoop: channel.eventLoop))
            try channel.pipeline.syncOperations.addHandler(handler)
            return handler
        }
        let small = [UInt8](repeating: 7, count: 27)  // an Invoke+Message+CloseSend's worth
        let big = [UInt8](repeating: 1, count: 1 << 20)
        let result = try await measure(
            iterations: iterations, messages: messages,
            small: { _ = try await client.roundTrip(small) },
            big: { _ = try await client.roundTrip(big) })
        client.channel.close(promise: nil)
        return result
    }
}

/// A minimal WebSocket client for the baseline: send one message, await the next one.
final class RawWebSocketClient: ChannelInboundHandler, Sendable {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    let channel: any Channel
    let writer: NIOLoopBound<WebSocketFrameWriter>
    private let waiter = Mutex<CheckedContinuation<[UInt8], any Error>?>(nil)

    init(channel: any Channel, writer: NIOLoopBound<WebSocketFrameWriter>) {
        self.channel = channel
        self.writer = writer
    }

    func roundTrip(_ bytes: [UInt8]) async throws -> [UInt8] {
        try await withCheckedThrowingContinuation { continuation in
            waiter.withLock { $0 = continuation }
            let frame = WebSocketFrame(fin: true, opcode: .binary, maskKey: .random(), data: ByteBuffer(bytes: bytes))
            let writer = self.writer
            channel.eventLoop.execute { writer.value.write(frame) }
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        guard frame.opcode == .binary else { return }
        let bytes = Array(frame.wordUnmaskedData.readableBytesView)
        waiter.withLock { w in
            w?.resume(returning: bytes)
            w = nil
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        waiter.withLock { w in
            w?.resume(throwing: ChannelError.ioOnClosedChannel)
            w = nil
        }
    }
}
