import Synchronization

/// An ``AgentEnvironmentProvider`` whose values change at run time: the control-plane
/// session updates it from every manifest. Until the first update it answers with the
/// fallback directory and no variables.
public final class UpdatableEnvironmentProvider: AgentEnvironmentProvider {
    private struct State {
        var environment: [String: String] = [:]
        var directory: String?
    }
    private let state: Mutex<State>

    public init(directory: String? = nil) {
        state = Mutex(State(environment: [:], directory: directory))
    }

    /// Replaces the variables and, when `directory` is non-empty, the default directory.
    public func update(environment: [String: String], directory: String?) {
        state.withLock { s in
            s.environment = environment
            if let directory, !directory.isEmpty { s.directory = directory }
        }
    }

    public func agentEnvironment() async throws -> [String: String] { state.withLock { $0.environment } }
    public func defaultDirectory() async -> String? { state.withLock { $0.directory } }
}
