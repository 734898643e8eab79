import Synchronization

/// What the control plane's manifest tells the other modules: the workspace directory and
/// the variables processes get (`CODER=true`, the workspace, agent and owner names, and the
/// manifest's own variables, expanded).
public struct AgentManifest: Sendable, Equatable {
    public var directory: String
    public var environment: [String: String]

    public init(directory: String, environment: [String: String]) {
        self.directory = directory
        self.environment = environment
    }
}

/// The latest manifest: the upward session publishes one on every connection, and modules
/// read it (nil until the first arrives, or forever when the agent runs standalone).
public final class ManifestStore: Sendable {
    private let latest = Mutex<AgentManifest?>(nil)

    public init() {}

    public func publish(_ manifest: AgentManifest) {
        latest.withLock { $0 = manifest }
    }

    public var current: AgentManifest? { latest.withLock { $0 } }
}
