import AgentCore
import Logging

/// The per-session reporters for a manifest: metadata, app health and stats.
enum ScriptsReporters {
    static func make(
        manifest: AgentManifest?, context: AgentContext, runner: ScriptRunner, logger: Logger
    ) -> [@Sendable (any UpwardSession) async throws -> Void] {
        []
    }
}
