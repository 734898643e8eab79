import AgentCore
import AgentProto
import AgentRPC
import AgentTestSupport
import ControlPlaneDouble
import Foundation
import Synchronization
import SwiftProtobuf
import Testing
@testable import Scripts

/// Metadata: the 10 KiB cap, the timeout rule, and the
/// reporter end to end against the control-plane double with real `/bin/sh` collections.
@Suite(.timeLimit(.minutes(5)))
struct MetadataReporterTests {
    typealias Kit = ReporterTestKit

    // MARK: Cap and timeout

    @Test func capAt10KiB() {
        let small = MetadataReporter.capped(Array("hello\n".utf8))
        #expect(small.value == "hello\n")
        #expect(small.note == nil)

        let exact = MetadataReporter.capped([UInt8](repeating: 0x61, count: 10_240))
        #expect(exact.value.utf8.count == 10_240)
        #expect(exact.note == nil)

        let big = MetadataReporter.capped([UInt8](repeating: 0x61, count: 20_000))
        #expect(big.value.utf8.count == 10_240)
        #expect(big.note == "output truncated from 20000 to 10240 bytes")

        // A 3-byte character straddling the limit is left out whole.
        let euro = Array("€".utf8)
        let straddling = [UInt8](repeating: 0x61, count: 10_239) + euro + [0x61]
        let cut = MetadataReporter.capped(straddling)
        #expect(cut.value.utf8.count == 10_239)
        #expect(cut.value.allSatisfy { $0 == "a" })
        #expect(cut.note == "output truncated from 10243 to 10240 bytes")

        // Invalid UTF-8 is replaced, and the value still stays within the limit.
        let invalid = MetadataReporter.capped([UInt8](repeating: 0xFF, count: 10_240))
        #expect(invalid.value.utf8.count <= 10_240)
        #expect(invalid.value.unicodeScalars.allSatisfy { $0 == "\u{FFFD}" })
        #expect(invalid.note == nil)

        // Only the first bytes kept, the total known.
        let counted = MetadataReporter.capped([UInt8](repeating: 0x62, count: 10_240), totalBytes: 1_000_000)
        #expect(counted.value.utf8.count == 10_240)
        #expect(counted.note == "output truncated from 1000000 to 10240 bytes")
    }

    @Test func timeoutIsTheTimeoutElseTheIntervalElseThreeSeconds() {
        #expect(MetadataReporter.timeout(for: .init(key: "a", script: "", interval: .seconds(5), timeout: .seconds(2))) == .seconds(2))
        #expect(MetadataReporter.timeout(for: .init(key: "a", script: "", interval: .seconds(5))) == .seconds(5))
        #expect(MetadataReporter.timeout(for: .init(key: "a", script: "", interval: .zero)) == .seconds(3))
    }

    // MARK: End to end

    /// A Description as coderd sends it: interval and timeout as `{nanos: N}` meaning N seconds.
    static func description(
        _ key: String, _ script: String, interval: Int32, timeout: Int32 = 0
    )
        -> Coder_Agent_V2_WorkspaceAgentMetadata.Description
    {
        var description = Coder_Agent_V2_WorkspaceAgentMetadata.Description()
        description.key = key
        description.displayName = key
        description.script = script
        description.interval = .init(seconds: 0, nanos: interval)
        description.timeout = .init(seconds: 0, nanos: timeout)
        return description
    }

    /// Runs a metadata reporter on a real session with `manifest`'s keys, collecting with
    /// `collect`, and hands `body` the double.
    static func withReporter(
        _ metadata: [Coder_Agent_V2_WorkspaceAgentMetadata.Description],
        collect: @escaping MetadataReporter.Collect = Kit.shellCollect,
        _ body: @escaping @Sendable (ControlPlaneDouble) async throws -> Void
    ) async throws {
        var manifest = ControlPlaneDouble.defaultManifest
        manifest.metadata = metadata
        let double = ControlPlaneDouble(manifest: manifest)
        let descriptions = ControlPlaneSession.agentManifest(from: manifest).metadata
        let reporter = MetadataReporter(descriptions: descriptions, collect: collect, logger: Kit.quiet)
        let participant = Kit.Participant(name: "metadata") { try await reporter.run(on: $0) }
        try await double.run { url in
            let session = Kit.makeSession(url, token: double.token, participants: [participant])
            let running = Task { try await session.run() }
            try await body(double)
            session.beginShutdown()
            try await running.value
        }
    }

    /// Every reported result of `key`, in order.
    static func results(_ double: ControlPlaneDouble, _ key: String) -> [Coder_Agent_V2_WorkspaceAgentMetadata.Result] {
        double.recorded.withLock { $0.metadataBatches }.flatMap { $0.metadata.filter { $0.key == key }.map(\.result) }
    }

    /// Keys at 1 s and 3 s and one at interval 0, several per request, at most about one
    /// request per second; values change between reads (a counter file per key).
    @Test func intervalsSeveralKeysPerRequestAndRate() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("metadata-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        func counting(_ name: String) -> String {
            let file = "\(directory)/\(name)"
            return "n=$(cat \(file) 2>/dev/null || echo 0); n=$((n+1)); echo $n > \(file); echo \(name) $n"
        }
        let metadata = [
            Self.description("fast", counting("fast"), interval: 1),
            Self.description("slow", counting("slow"), interval: 3),
            Self.description("once", counting("once"), interval: 0),
            Self.description("fails", "echo oops >&2; exit 3", interval: 1),
        ]
        try await Self.withReporter(metadata) { double in
            #expect(await eventually(timeout: Kit.patience) { Self.results(double, "fast").count >= 8 })
            let fast = Self.results(double, "fast").map(\.value)
            let slow = Self.results(double, "slow").map(\.value)
            let once = Self.results(double, "once").map(\.value)
            // Each report carries a new collection: the counters only go up (a newer result
            // may replace an unsent one, so numbers may be skipped).
            let numbers = fast.compactMap { Int($0.dropFirst(5).dropLast()) }
            #expect(numbers.count == fast.count && numbers.first == 1, "\(fast)")
            #expect(zip(numbers, numbers.dropFirst()).allSatisfy { $0 < $1 }, "\(fast)")
            #expect(once == ["once 1\n"], "interval 0: once per session")
            #expect(slow.first == "slow 1\n")
            // The interval is honoured: collections of the 3 s key start at least ~3 s apart
            // (lower bounds only: a loaded host spaces them further), the 1 s key's ~1 s.
            func spacing(_ key: String) -> [Double] {
                let starts = Self.results(double, key).map { Double($0.collectedAt.seconds) + Double($0.collectedAt.nanos) / 1e9 }
                return zip(starts, starts.dropFirst()).map { $1 - $0 }
            }
            #expect(await eventually(timeout: Kit.patience) { Self.results(double, "slow").count >= 3 })
            // On average: a tick that wakes late shortens the gap after it and lengthens the
            // one before (due times follow the schedule, not the late wake-up).
            func mean(_ values: [Double]) -> Double { values.isEmpty ? 0 : values.reduce(0, +) / Double(values.count) }
            #expect(mean(spacing("slow")) >= 2.0, "\(spacing("slow"))")
            #expect(mean(spacing("fast")) >= 0.5, "\(spacing("fast"))")

            let failed = try #require(Self.results(double, "fails").first)
            #expect(failed.value == "oops\n", "stderr is in the value")
            #expect(failed.error == "run cmd: exit status 3")

            let batches = double.recorded.withLock { $0.metadataBatches }
            // Several keys per request (not necessarily the first: on a loaded host one key's
            // result can be ready alone at the first tick).
            #expect(batches.contains { $0.metadata.count >= 2 }, "several keys per request: \(batches.map { $0.metadata.map(\.key) })")
            #expect(batches.allSatisfy { batch in Set(batch.metadata.map(\.key)).count == batch.metadata.count })
            for result in batches.flatMap({ $0.metadata.map(\.result) }) {
                #expect(result.hasCollectedAt && result.collectedAt.seconds > 0)
                #expect(result.age == 0)
            }
            // Rate: at most about one request per tick over the whole window.
            let times = double.recorded.withLock { $0.metadataTimes }
            if let start = times.first, let end = times.last {
                let seconds = Double((end - start).components.seconds) + 1
                #expect(Double(times.count) <= seconds * 1.5 + 2, "\(times.count) requests over \(seconds) s")
            }
        }
    }

    /// The timeout kills a collection that runs too long; its result is still reported,
    /// with what it wrote and the error.
    @Test func timeoutIsEnforcedAndTheResultReported() async throws {
        let metadata = [Self.description("sleepy", "echo started; exec sleep 600", interval: 30, timeout: 1)]
        try await Self.withReporter(metadata) { double in
            #expect(await eventually(timeout: Kit.patience) { !Self.results(double, "sleepy").isEmpty })
            let result = try #require(Self.results(double, "sleepy").first)
            #expect(result.value == "started\n")
            #expect(result.error == "run cmd: signal: killed\ncontext deadline exceeded")
        }
    }

    /// Output over 10 KiB is cut and the error says so.
    @Test func outputIsCappedEndToEnd() async throws {
        let metadata = [Self.description("big", "head -c 20000 /dev/zero | tr '\\0' x", interval: 30)]
        try await Self.withReporter(metadata) { double in
            #expect(await eventually(timeout: Kit.patience) { !Self.results(double, "big").isEmpty })
            let result = try #require(Self.results(double, "big").first)
            #expect(result.value.utf8.count == 10_240)
            #expect(result.error == "run cmd: output truncated from 20000 to 10240 bytes")
        }
    }

    /// A key whose collection still runs is not started again (single flight), and other
    /// keys go on meanwhile; a newer result replaces an unsent one.
    @Test func singleFlightPerKey() async throws {
        let running = Mutex<[String: Int]>([:])
        let overlaps = Atomic(0)
        let starts = Atomic(0)
        let release = TestFlag()
        let collect: MetadataReporter.Collect = { description, _ in
            let concurrent = running.withLock {
                $0[description.key, default: 0] += 1; return $0[description.key]!
            }
            if concurrent > 1 { overlaps.add(1, ordering: .relaxed) }
            defer { running.withLock { $0[description.key, default: 1] -= 1 } }
            if description.key == "stuck" {
                starts.add(1, ordering: .relaxed)
                // Longer than several ticks; bounded by the flag or 60 s.
                await release.wait(upTo: .seconds(60))
                return ("done", "")
            }
            return ("quick", "")
        }
        let metadata = [Self.description("stuck", "", interval: 1), Self.description("quick", "", interval: 1)]
        try await Self.withReporter(metadata, collect: collect) { double in
            #expect(await eventually(timeout: Kit.patience) { Self.results(double, "quick").count >= 4 })
            #expect(starts.load(ordering: .relaxed) == 1, "not started again while running")
            #expect(Self.results(double, "stuck").isEmpty)
            release.set()
            #expect(await eventually(timeout: Kit.patience) { Self.results(double, "stuck").first?.value == "done" })
            #expect(await eventually(timeout: Kit.patience) { starts.load(ordering: .relaxed) >= 2 }, "collected again afterwards")
        }
        #expect(overlaps.load(ordering: .relaxed) == 0)
    }

    /// A failing report (coderd refuses keys over 6144 bytes in all) is logged and the
    /// reporter goes on; the session stays up.
    @Test func aRefusedReportDoesNotEndTheReporter() async throws {
        let longKey = String(repeating: "k", count: 7000)
        let counter = Atomic(0)
        let collect: MetadataReporter.Collect = { description, _ in
            let n = counter.add(1, ordering: .relaxed).newValue
            return ("\(description.key.prefix(1)) \(n)", "")
        }
        // The long key is collected once (interval 0): the batches after the first go through.
        let metadata = [Self.description(longKey, "", interval: 0), Self.description("short", "", interval: 1)]
        try await Self.withReporter(metadata, collect: collect) { double in
            #expect(await eventually(timeout: Kit.patience) { Self.results(double, "short").count >= 2 })
            #expect(Self.results(double, longKey).isEmpty)
            #expect(double.recorded.withLock { $0.connections } == 1, "the connection was not dropped")
        }
    }
}
