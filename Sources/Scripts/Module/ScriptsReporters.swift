import AgentCore
import Logging

/// The per-session reporters for the current manifest: metadata (commands run like the
/// scripts'), app health and stats. Standalone or before a manifest, only stats.
enum ScriptsReporters {
    static func make(
        manifest: AgentManifest?, stats: StatsReporter, runner: ScriptRunner, logger: Logger
    ) -> [@Sendable (any UpwardSession) async throws -> Void] {
        var reporters: [@Sendable (any UpwardSession) async throws -> Void] = [{ try await stats.run(on: $0) }]
        guard let manifest else { return reporters }
        if !manifest.metadata.isEmpty {
            let context = runner.commandContext(manifest)
            let metadata = MetadataReporter(
                descriptions: manifest.metadata,
                collect: { description, timeout in
                    await MetadataCommand.collect(script: description.script, timeout: timeout, context: context)
                },
                logger: logger)
            reporters.append { try await metadata.run(on: $0) }
        }
        let health = AppHealthReporter(apps: manifest.apps, logger: logger)
        reporters.append { try await health.run(on: $0) }
        return reporters
    }
}
