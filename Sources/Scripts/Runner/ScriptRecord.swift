import AgentCore
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// What became of one run, as `GET /api/v0/scripts` shows it.
struct ScriptRunRecord: Encodable, Sendable, Equatable {
    /// Counts the script's runs from 1 (per agent process).
    var run: Int
    var stage: String
    var status: String
    var exitCode: Int32
    var startedAt: String
    var endedAt: String
    var error: String?

    enum CodingKeys: String, CodingKey {
        case run, stage, status, exitCode = "exit_code", startedAt = "started_at", endedAt = "ended_at", error
    }

    init(run: Int, stage: ScriptStage, exit: ScriptExit) {
        self.run = run
        self.stage = stage.description
        self.status = ["ok", "exit_failure", "timed_out", "pipes_left_open"][exit.status.rawValue]
        self.exitCode = exit.exitCode
        self.startedAt = RFC3339.format(exit.start)
        self.endedAt = RFC3339.format(exit.end)
        self.error = exit.error
    }
}

/// Why a script runs (`Timing.Stage`, with an on-demand run reported as CRON: a run outside
/// the start and stop phases).
enum ScriptStage: Int, Sendable, CustomStringConvertible {
    case start = 0
    case stop = 1
    case cron = 2
    case onDemand = 3

    var wire: Int { self == .onDemand ? ScriptStage.cron.rawValue : rawValue }

    var description: String {
        switch self {
        case .start: "start"
        case .stop: "stop"
        case .cron: "cron"
        case .onDemand: "on_demand"
        }
    }
}

/// A script as the status route shows it.
struct ScriptStatus: Encodable, Sendable {
    var id: String
    var logSourceID: String
    var displayName: String?
    var logPath: String
    var runOnStart: Bool
    var runOnStop: Bool
    var startBlocksLogin: Bool
    var cron: String?
    var cronNext: String?
    var cronError: String?
    var cronWarning: String?
    var timeoutSeconds: Double
    var running: Int
    /// The last ``ScriptRunner/runsKept`` runs, oldest first.
    var runs: [ScriptRunRecord]

    enum CodingKeys: String, CodingKey {
        case id, logSourceID = "log_source_id", displayName = "display_name", logPath = "log_path"
        case runOnStart = "run_on_start", runOnStop = "run_on_stop", startBlocksLogin = "start_blocks_login"
        case cron, cronNext = "cron_next", cronError = "cron_error", cronWarning = "cron_warning"
        case timeoutSeconds = "timeout_seconds", running, runs
    }
}

/// The answer of `GET /api/v0/scripts`.
struct ScriptsStatus: Encodable, Sendable {
    /// The lifecycle state last reported (`starting`, `ready`, `start_error`, ...).
    var lifecycle: String
    /// False until the first manifest arrived (standalone: always).
    var manifestReceived: Bool
    var scripts: [ScriptStatus]

    enum CodingKeys: String, CodingKey {
        case lifecycle, manifestReceived = "manifest_received", scripts
    }
}

/// RFC 3339 in UTC with milliseconds (`2026-11-24T01:02:03.456Z`).
enum RFC3339 {
    static func format(_ date: Date) -> String {
        let interval = date.timeIntervalSince1970
        var seconds = time_t(interval.rounded(.down))
        let millis = Int(((interval - Double(seconds)) * 1000).rounded(.down))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func pad(_ value: Int32, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(Int32(min(999, max(0, millis))), 3))Z"
    }
}
