import AgentCore
import AgentSystem
import Logging

extension VSCodeGitAuthOverride {
    /// Blocking file work off the cooperative threads (once per agent process).
    private static let pool = BlockingPool(name: "vscode-settings", threads: 1, maxQueued: 2)

    /// The manifest step: on the agent's first manifest, when the deployment has git
    /// providers, the editors' settings are changed before the start scripts run; an error is
    /// a warning (the reference's), never fatal.
    public static func preparation(home: @escaping @Sendable () -> String, dataHome: String?, logger: Logger) -> ManifestPreparation {
        { manifest, first in
            guard first, manifest.gitAuthConfigs > 0 else { return }
            let directory = home()
            guard directory.hasPrefix("/") else {
                logger.warning("failed to override vscode git auth configs", metadata: ["error": "no home directory"])
                return
            }
            let error: VSCodeSettingsError?
            do {
                error = try await pool.run { _ in apply(home: directory, dataHome: dataHome) }
            } catch {
                logger.warning("failed to override vscode git auth configs", metadata: ["error": "\(error)"])
                return
            }
            if let error {
                logger.warning("failed to override vscode git auth configs", metadata: ["error": "\(error)"])
            }
        }
    }
}
