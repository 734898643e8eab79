import AgentCore
import AgentProto
import AgentRPC
import AgentTestSupport
import ControlPlaneDouble
import Synchronization
import SwiftProtobuf
import Testing
@testable import Scripts

/// Stats: the probe, the interval the answers set, honest
/// zeros without traffic, the tunnel's flows once there are some, the agent's metrics.
@Suite(.timeLimit(.minutes(5)))
struct StatsReporterTests {
    typealias Kit = ReporterTestKit

    /// A counter that goes up at every read, and a gauge with two labels.
    final class FakeMetrics: MetricsSnapshotSource {
        let reads = Atomic(0)
        func samples() -> [MetricSample] {
            let n = reads.add(1, ordering: .relaxed).newValue
            return [
                MetricSample(name: "agent_test_reads_total", kind: .counter, value: Double(n)),
                MetricSample(name: "agent_test_level", kind: .gauge, value: 0.5, labels: [("zone", "b"), ("area", "a")]),
            ]
        }
    }

    /// One IPv6 packet of `size` bytes from `source` to `destination` (the last byte of a
    /// fd7a:115c:a1e0:: address), `ipProtocol` 6 (TCP) or 17 (UDP), with ports.
    static func packet(
        _ ipProtocol: UInt8, from source: UInt8, _ sourcePort: UInt16, to destination: UInt8, _ destinationPort: UInt16,
        size: Int
    ) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: max(size, 48))
        bytes[0] = 0x60
        let payload = bytes.count - 40
        bytes[4] = UInt8(payload >> 8)
        bytes[5] = UInt8(payload & 0xFF)
        bytes[6] = ipProtocol
        bytes[7] = 64
        let prefix: [UInt8] = [0xFD, 0x7A, 0x11, 0x5C, 0xA1, 0xE0]
        bytes.replaceSubrange(8..<14, with: prefix)
        bytes[23] = source
        bytes.replaceSubrange(24..<30, with: prefix)
        bytes[39] = destination
        bytes[40] = UInt8(sourcePort >> 8)
        bytes[41] = UInt8(sourcePort & 0xFF)
        bytes[42] = UInt8(destinationPort >> 8)
        bytes[43] = UInt8(destinationPort & 0xFF)
        return bytes
    }

    static func record(_ traffic: TunnelTraffic, _ packet: [UInt8], inbound: Bool) {
        packet.withUnsafeBytes { traffic.record(packet: $0, inbound: inbound) }
    }

    @Test func intervalFromTheAnswer() {
        func answer(_ seconds: Int64, _ nanos: Int32 = 0) -> Coder_Agent_V2_UpdateStatsResponse {
            var response = Coder_Agent_V2_UpdateStatsResponse()
            response.reportInterval = Google_Protobuf_Duration(seconds: seconds, nanos: nanos)
            return response
        }
        #expect(StatsReporter.interval(from: Coder_Agent_V2_UpdateStatsResponse()) == .seconds(30), "absent")
        #expect(StatsReporter.interval(from: answer(0)) == .seconds(30), "zero")
        #expect(StatsReporter.interval(from: answer(-5)) == .seconds(30), "negative")
        #expect(StatsReporter.interval(from: answer(0, 500_000_000)) == .seconds(1), "clamped up")
        #expect(StatsReporter.interval(from: answer(7200)) == .seconds(3600), "clamped down")
        #expect(StatsReporter.interval(from: answer(5, 250_000_000)) == .milliseconds(5250))
    }

    @Test func statsFields() {
        var window = TunnelTraffic.Window()
        window.flowsByProtocol = ["tcp": 2, "udp": 1]
        window.received = .init(packets: 3, bytes: 300)
        window.sent = .init(packets: 2, bytes: 120)
        let stats = StatsReporter.stats(window, samples: FakeMetrics().samples())
        #expect(stats.connectionCount == 3)
        #expect(stats.connectionsByProto == ["tcp": 2, "udp": 1])
        #expect((stats.rxPackets, stats.rxBytes, stats.txPackets, stats.txBytes) == (3, 300, 2, 120))
        #expect(stats.connectionMedianLatencyMs == -1)
        #expect(stats.sessionCountSsh == 0 && stats.sessionCountVscode == 0)
        #expect(stats.sessionCountJetbrains == 0 && stats.sessionCountReconnectingPty == 0)
        #expect(stats.metrics.map(\.type) == [.counter, .gauge])
        #expect(stats.metrics[1].labels.map(\.name) == ["zone", "area"], "labels in the backend's order")
        let merged = StatsReporter.merged(window, window)
        #expect(merged.flows == 6 && merged.received.bytes == 600 && merged.sent.packets == 4)
    }

    /// The probe, then reports at the answer's interval: zeros without traffic, then the
    /// flows recorded into the tunnel's traffic; metrics forwarded; a new interval applied.
    @Test func probeThenReportsAgainstTheDouble() async throws {
        let double = ControlPlaneDouble()
        double.statsReportInterval.withLock { $0 = .seconds(1) }
        let traffic = TunnelTraffic()
        let metrics = FakeMetrics()
        let reporter = StatsReporter(traffic: traffic, metrics: metrics, logger: Kit.quiet)
        let participant = Kit.Participant(name: "stats") { try await reporter.run(on: $0) }
        @Sendable func requests() -> [Coder_Agent_V2_UpdateStatsRequest] { double.recorded.withLock { $0.statsRequests } }

        try await double.run { url in
            let session = Kit.makeSession(url, token: double.token, participants: [participant])
            let running = Task { try await session.run() }
            #expect(await eventually(timeout: Kit.patience) { requests().count >= 3 })
            let first = requests()
            #expect(!first[0].hasStats, "the probe carries no stats")
            for report in first.dropFirst() {
                #expect(report.hasStats)
                #expect(report.stats.connectionCount == 0, "honest zeros without traffic")
                #expect(report.stats.connectionsByProto.isEmpty)
                #expect(report.stats.rxBytes == 0 && report.stats.txBytes == 0 && report.stats.rxPackets == 0)
                #expect(report.stats.connectionMedianLatencyMs == -1)
            }
            let counts = first.dropFirst().map { $0.stats.metrics.first { $0.name == "agent_test_reads_total" }?.value ?? -1 }
            #expect(counts.count >= 2 && counts[0] < counts[1], "a fresh snapshot per report: \(counts)")
            let gauge = first[1].stats.metrics.first { $0.name == "agent_test_level" }
            #expect(gauge?.type == .gauge && gauge?.value == 0.5)
            #expect(gauge?.labels.map(\.value) == ["b", "a"])

            // Traffic: two TCP flows (one each way) and one UDP flow.
            let before = requests().count
            for _ in 0..<3 { Self.record(traffic, Self.packet(6, from: 2, 50000, to: 1, 22, size: 100), inbound: true) }
            for _ in 0..<2 { Self.record(traffic, Self.packet(6, from: 1, 22, to: 2, 50000, size: 60), inbound: false) }
            Self.record(traffic, Self.packet(17, from: 2, 40000, to: 1, 53, size: 80), inbound: true)
            #expect(
                await eventually(timeout: Kit.patience) {
                    requests().dropFirst(before).reduce(0) { $0 + $1.stats.rxBytes } == 380
                }, "\(requests().dropFirst(before).map(\.stats))")
            let after = Array(requests().dropFirst(before))
            #expect(after.reduce(0) { $0 + $1.stats.rxPackets } == 4)
            #expect(after.reduce(0) { $0 + $1.stats.txPackets } == 2)
            #expect(after.reduce(0) { $0 + $1.stats.txBytes } == 120)
            #expect(after.reduce(0) { $0 + $1.stats.connectionCount } >= 3)
            #expect(after.reduce(0) { $0 + ($1.stats.connectionsByProto["tcp"] ?? 0) } >= 2)
            #expect(after.reduce(0) { $0 + ($1.stats.connectionsByProto["udp"] ?? 0) } >= 1)

            // A new interval in an answer is applied: reports then come ~3 s apart (a
            // lower bound; the first report after the change still came at the old interval).
            double.statsReportInterval.withLock { $0 = .seconds(3) }
            let changed = double.recorded.withLock { $0.statsTimes.count }
            #expect(await eventually(timeout: Kit.patience) { double.recorded.withLock { $0.statsTimes.count } >= changed + 3 })
            let times = double.recorded.withLock { $0.statsTimes }
            let late = zip(times.dropFirst(changed + 1), times.dropFirst(changed + 2)).map { $1 - $0 }
            #expect(!late.isEmpty && late.allSatisfy { $0 >= .milliseconds(2500) }, "\(late)")

            session.beginShutdown()
            try await running.value
        }
    }

    /// A report that fails keeps its traffic for the next one.
    @Test func aFailedReportsTrafficGoesWithTheNext() async throws {
        let session = ScriptedSession(failing: [1])
        let traffic = TunnelTraffic()
        let reporter = StatsReporter(traffic: traffic, logger: Kit.quiet)
        Self.record(traffic, Self.packet(6, from: 2, 1, to: 1, 2, size: 100), inbound: true)
        let running = Task { try await reporter.run(on: session) }
        // Call 0 is the probe (1 s), call 1 fails with the first window, call 2 carries it.
        #expect(await eventually(timeout: Kit.patience) { session.sent.count >= 3 })
        Self.record(traffic, Self.packet(6, from: 2, 1, to: 1, 2, size: 50), inbound: true)
        #expect(await eventually(timeout: Kit.patience) { session.sent.reduce(0) { $0 + $1.stats.rxBytes } >= 250 })
        running.cancel()
        try await running.value
        let sent = session.sent
        #expect(sent[1].stats.rxBytes == 100, "the failed one")
        #expect(sent[2].stats.rxBytes == 100, "carried into the next")
        #expect(sent.dropFirst(3).reduce(0) { $0 + $1.stats.rxBytes } == 50, "nothing counted twice")
    }

    /// An upward session that answers `UpdateStats` itself (1 s interval), failing the calls
    /// whose numbers are in `failing`; it records every request, failed ones too.
    final class ScriptedSession: UpwardSession {
        private let failing: Set<Int>
        private let requests = Mutex<[Coder_Agent_V2_UpdateStatsRequest]>([])

        init(failing: Set<Int>) { self.failing = failing }

        var number: Int { 1 }

        var sent: [Coder_Agent_V2_UpdateStatsRequest] { requests.withLock { $0 } }

        func unary(_ rpc: String, request: [UInt8], maxMessageBytes: Int) async throws(UpwardStreamError) -> [UInt8] {
            guard let decoded = try? Coder_Agent_V2_UpdateStatsRequest(serializedBytes: request) else {
                throw UpwardStreamError(.protocolViolation)
            }
            let index = requests.withLock { list in
                list.append(decoded)
                return list.count - 1
            }
            if failing.contains(index) { throw UpwardStreamError(.remote(code: 0, message: "refused")) }
            var response = Coder_Agent_V2_UpdateStatsResponse()
            response.reportInterval = Google_Protobuf_Duration(seconds: 1, nanos: 0)
            return (try? response.serializedBytes()) ?? []
        }

        func serverStream(_ rpc: String, request: [UInt8], maxMessageBytes: Int) async throws(UpwardStreamError) -> UpwardMessages {
            throw UpwardStreamError(.unsupported)
        }

        func bidiStream(_ rpc: String, maxMessageBytes: Int) async throws(UpwardStreamError) -> UpwardBidiStream {
            throw UpwardStreamError(.unsupported)
        }
    }
}
