import AgentCore
import AgentProto
import FoundationEssentials
import Logging
import SwiftProtobuf
import Synchronization

/// Collects the manifest's metadata and reports it upward on one connected session.
///
/// - A 1 s tick drives collection and reporting; the first tick is at once.
/// - Each tick, every key whose previous collection has ended (per-key single flight) and
///   that is due is collected: due when never collected in this run, or when its interval is
///   above zero and `last start + interval` is not after this tick. `last start` is the
///   scheduled instant of the tick that started it (not the instant the task woke), so a
///   late wake-up on a loaded host does not push a 1 s key to every other tick. Interval 0:
///   once per run (per session).
/// - Timeout given to `collect`: the key's timeout, else its interval, else 3 s.
/// - Results are kept per key (a newer one replaces an unsent one); each tick, when there
///   are any and no report is in flight, one `BatchUpdateMetadata` carries all of them
///   (in manifest order), with a 30 s deadline.
///
/// Deliberate differences from the reference:
/// - A result whose collection timed out is always reported, with its error (the reference
///   drops about half of them at random).
/// - A failed report is logged and its results dropped; the reporter goes on (the
///   reference ends the routine, which drops the whole connection and redials). The next
///   collection of each key reports it again.
///
/// `collect` runs one key's command and returns its output and error text (the scripts
/// runner provides it: the user's shell, the manifest's environment, output capped with
/// ``capped(_:totalBytes:)``). It must return by about the timeout it is given, and soon
/// when its task is cancelled: the reporter never abandons a collection (a key whose
/// collection hangs is simply not collected again; the others go on), and ``run(on:)``
/// returns only once the collections it started have.
///
/// Memory: one pending result per manifest key, each value at most ``maxValueBytes`` (a
/// longer one is cut here as well), and at most one collection task per key.
public struct MetadataReporter: Sendable {
    /// Runs one key's command within the timeout: its output (stdout and stderr together) and
    /// its error text (empty when none).
    public typealias Collect = @Sendable (_ description: ManifestMetadata, _ timeout: Duration) async -> (value: String, error: String)

    static let rpc = "/coder.agent.v2.Agent/BatchUpdateMetadata"
    /// The reference's limit on a value (10 KiB).
    public static let maxValueBytes = 10_240
    /// The timeout of a key with neither a timeout nor an interval.
    public static let defaultTimeout: Duration = .seconds(3)

    /// The manifest's keys, first of each key kept (a key listed twice is collected once).
    public let descriptions: [ManifestMetadata]
    private let collect: Collect
    private let logger: Logger
    private let tick: Duration

    /// - Parameters:
    ///   - descriptions: the manifest's metadata keys, as this session's manifest lists them.
    ///   - collect: runs one key's command (see the type's documentation).
    ///   - tick: the period that drives collection and reporting (the reference's 1 s).
    public init(descriptions: [ManifestMetadata], collect: @escaping Collect, logger: Logger, tick: Duration = .seconds(1)) {
        var seen = Set<String>()
        self.descriptions = descriptions.filter { seen.insert($0.key).inserted }
        self.collect = collect
        self.logger = logger
        self.tick = tick
    }

    /// The timeout of one collection of `description`: its timeout, else its interval, else 3 s.
    public static func timeout(for description: ManifestMetadata) -> Duration {
        if description.timeout > .zero { return description.timeout }
        if description.interval > .zero { return description.interval }
        return defaultTimeout
    }

    /// Applies the reference's 10 KiB cap to a command's output. `output` is what was kept
    /// (all of it, or its first bytes), `totalBytes` how many the command wrote (default:
    /// `output.count`). Over ``maxValueBytes`` the value is cut and the note is
    /// `output truncated from <N> to 10240 bytes`, to be joined to the errors.
    ///
    /// The cut falls on a UTF-8 boundary (so up to 3 bytes short of 10 240 when a character
    /// straddles it; the reference cuts at exactly 10 240 bytes, which can split a character
    /// and then fail the protobuf encoding). Invalid UTF-8 is replaced by U+FFFD, since
    /// protobuf strings are UTF-8; the value never exceeds 10 240 bytes even then.
    public static func capped(_ output: [UInt8], totalBytes: Int? = nil) -> (value: String, note: String?) {
        let total = max(totalBytes ?? output.count, output.count)
        var cut = min(output.count, maxValueBytes)
        if cut < output.count {
            // Back to the first byte of the character the limit falls in (at most 3 steps in
            // valid UTF-8; further back is invalid anyway and gets replaced).
            var steps = 0
            while cut > 0, steps < 3, output[cut] & 0xC0 == 0x80 {
                cut -= 1
                steps += 1
            }
        }
        var value = String(decoding: output[..<cut], as: UTF8.self)
        if value.utf8.count > maxValueBytes { value = prefix(value, bytes: maxValueBytes) }
        let note = total > maxValueBytes ? "output truncated from \(total) to \(maxValueBytes) bytes" : nil
        return (value, note)
    }

    /// The longest prefix of `text` of at most `bytes` UTF-8 bytes, on a scalar boundary.
    static func prefix(_ text: String, bytes: Int) -> String {
        var scalars = String.UnicodeScalarView()
        var used = 0
        for scalar in text.unicodeScalars {
            let width = UTF8.width(scalar)
            guard used + width <= bytes else { break }
            used += width
            scalars.append(scalar)
        }
        return String(scalars)
    }

    /// What one run keeps between its ticks, its collections and its reports.
    private struct State {
        var collecting = Set<String>()
        var lastStart: [String: ContinuousClock.Instant] = [:]
        var pending: [String: MetadataResult] = [:]
        var reporting = false
    }

    private final class RunState: Sendable {
        let state = Mutex(State())
    }

    /// Collects and reports until the task is cancelled (then returns, once the collections
    /// in flight have returned). Returns at once when the manifest has no metadata.
    public func run(on session: any UpwardSession) async throws {
        guard !descriptions.isEmpty else { return }
        let run = RunState()
        do {
            try await withThrowingDiscardingTaskGroup { group in
                var ticks = TickSchedule(period: tick, first: .zero)
                while true {
                    let now = try await ticks.wait()
                    for description in due(at: now, run) {
                        group.addTask { await collectOne(description, run) }
                    }
                    if let batch = takeBatch(run) {
                        group.addTask { await report(batch, on: session, run) }
                    }
                }
            }
        } catch is CancellationError {
            return
        }
    }

    /// The keys to collect at tick `now`, marked as collecting.
    private func due(at now: ContinuousClock.Instant, _ run: RunState) -> [ManifestMetadata] {
        run.state.withLock { state in
            descriptions.filter { description in
                guard !state.collecting.contains(description.key) else { return false }
                if let last = state.lastStart[description.key] {
                    guard description.interval > .zero, last + description.interval <= now else { return false }
                }
                state.collecting.insert(description.key)
                state.lastStart[description.key] = now
                return true
            }
        }
    }

    /// Collects one key and keeps its result for the next report.
    private func collectOne(_ description: ManifestMetadata, _ run: RunState) async {
        let collectedAt = Date()
        var (value, error) = await collect(description, Self.timeout(for: description))
        if value.utf8.count > Self.maxValueBytes {
            // The collector should have capped it; cap it here all the same (the bound).
            let capped = Self.capped(Array(value.utf8))
            value = capped.value
            if let note = capped.note { error = error.isEmpty ? "run cmd: \(note)" : "\(error)\n\(note)" }
        }
        ReportMetrics.metadataCollection(ok: error.isEmpty)
        let result = MetadataResult(collectedAt: collectedAt, value: value, error: error)
        run.state.withLock { state in
            state.collecting.remove(description.key)
            state.pending[description.key] = result
        }
    }

    /// Every pending result in manifest order, when there is any and no report is in flight
    /// (the report is then marked in flight).
    private func takeBatch(_ run: RunState) -> [(key: String, result: MetadataResult)]? {
        run.state.withLock { state in
            guard !state.reporting, !state.pending.isEmpty else { return nil }
            let batch = descriptions.compactMap { description in
                state.pending[description.key].map { (key: description.key, result: $0) }
            }
            state.pending.removeAll(keepingCapacity: true)
            state.reporting = true
            return batch
        }
    }

    /// Sends one `BatchUpdateMetadata`; a failure is logged and the batch dropped.
    private func report(_ batch: [(key: String, result: MetadataResult)], on session: any UpwardSession, _ run: RunState) async {
        defer { run.state.withLock { $0.reporting = false } }
        var request = Coder_Agent_V2_BatchUpdateMetadataRequest()
        request.metadata = batch.map { entry in
            var item = Coder_Agent_V2_BatchUpdateMetadataRequest.Metadata()
            item.key = entry.key
            item.result.collectedAt = Google_Protobuf_Timestamp(date: entry.result.collectedAt)
            item.result.value = entry.result.value
            item.result.error = entry.result.error
            return item
        }
        do {
            _ = try await UpwardCall.unary(session, Self.rpc, request)
            ReportMetrics.metadataReport(ok: true)
        } catch {
            guard !Task.isCancelled else { return }
            ReportMetrics.metadataReport(ok: false)
            logger.warning(
                "metadata report failed; its results are dropped", metadata: ["error": "\(error)", "keys": "\(batch.count)"])
        }
    }
}
