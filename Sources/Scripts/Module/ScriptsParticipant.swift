import AgentCore
import Logging

/// The scripts' work on each upward session: the durable uploads (log lines, then
/// `ScriptCompleted` reports, both from disk, in order) and the per-session reporters
/// (metadata, app health, stats) built from the current manifest.
struct ScriptsParticipant: UpwardParticipant {
    let uploads: ScriptUploads
    let metrics: ScriptsMetrics
    let logger: Logger
    /// The per-session reporters for the current manifest (metadata, app health, stats).
    let reporters: @Sendable () -> [@Sendable (any UpwardSession) async throws -> Void]
    let shuttingDown: @Sendable () -> Bool

    var name: String { "scripts" }

    func run(on session: any UpwardSession) async throws {
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask {
                try await LogUploader(uploads: uploads, metrics: metrics, logger: logger, shuttingDown: shuttingDown).run(on: session)
            }
            group.addTask { try await ReportUploader(uploads: uploads, metrics: metrics, logger: logger).run(on: session) }
            // A reporter that fails ends alone (logged); the uploads go on.
            for reporter in reporters() {
                group.addTask {
                    do {
                        try await reporter(session)
                    } catch  where !Task.isCancelled {
                        logger.warning("scripts reporter ended", metadata: ["error": "\(error)"])
                    }
                }
            }
        }
    }

    /// Stop scripts' lines and reports go up before the session closes.
    func drained() async {
        await uploads.waitDrained()
    }
}
