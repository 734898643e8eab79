import AgentCore
import CoreMetrics
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The failed writes of the files that outlive the agent (tool-call claims, process
/// records, output spools): each is counted, and logged at most once per file every
/// ``logInterval`` (the next line says how many were not logged meanwhile), so a full disk
/// cannot flood the log. The count and the last failure are shown by `GET /status`.
final class DurableFailures: Sendable {
    /// Which file failed.
    enum File: String, Sendable, CaseIterable {
        case toolCalls = "tool-calls.jsonl"
        case processRecords = "processes.jsonl"
        case spool = "spool"
    }

    /// Least time between two log lines about one file.
    static let logInterval: Duration = .seconds(30)

    struct Failure: Sendable, Equatable {
        var file: File
        /// The failed call and its error (`write: no space left on device`).
        var error: String
        var atUnix: Int64
    }

    private struct State {
        var count = 0
        var last: Failure?
        var lastLogged: [File: ContinuousClock.Instant] = [:]
        var suppressed: [File: Int] = [:]
    }

    private let state = Mutex(State())
    private let logger: Logger

    init(logger: Logger) {
        self.logger = logger
    }

    /// Failed writes since the manager started.
    var count: Int { state.withLock { $0.count } }

    /// The most recent failure.
    var last: Failure? { state.withLock { $0.last } }

    /// Counts a failed write of `file` and logs it unless one about the same file was logged
    /// less than ``logInterval`` ago.
    func report(_ file: File, _ error: SystemCallError) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let instant = ContinuousClock.now
        let skipped = state.withLock { s -> Int? in
            s.count += 1
            s.last = Failure(file: file, error: error.description, atUnix: Int64(now.tv_sec))
            if let logged = s.lastLogged[file], instant - logged < Self.logInterval {
                s.suppressed[file, default: 0] += 1
                return nil
            }
            s.lastLogged[file] = instant
            return s.suppressed.removeValue(forKey: file) ?? 0
        }
        switch file {
        case .spool: break  // counted by the spool itself
        case .toolCalls, .processRecords: ProcessMetrics.durableLogFailures.increment()
        }
        guard let skipped else {
            ProcessMetrics.failureLogsSuppressed.increment()
            return
        }
        logger.warning(
            "a file the agent keeps across restarts could not be written",
            metadata: [
                "file": "\(file.rawValue)", "error": "\(error)", "not_logged_before": "\(skipped)",
            ])
    }
}
