import Synchronization

/// Variables that sessions the agent runs add to the environment of every process started
/// through the process API while they run: the desktop sets `DISPLAY` when its X server is
/// up and takes it away when it stops, so a child started meanwhile draws on that desktop.
///
/// The seam between two capability modules that must not import each other: the desktop
/// writes, the process API reads. Created once by the executable and handed to both in
/// ``AgentContext``. A child's own request variables still win over these.
///
/// Bounded: one set of variables per owner, and the owners are the agent's modules (one
/// today, "desktop").
public final class SessionEnvironment: Sendable {
    /// The variables at one moment and a generation that changes whenever they do.
    public struct Snapshot: Sendable, Equatable {
        /// Equal generations mean equal variables (starts reuse environments built for it).
        public var generation: UInt64
        public var variables: [String: String]

        public init(generation: UInt64, variables: [String: String]) {
            self.generation = generation
            self.variables = variables
        }
    }

    private struct State {
        var generation: UInt64 = 0
        var owners: [String: [String: String]] = [:]
        var merged: [String: String] = [:]
    }

    private let state = Mutex(State())

    public init() {}

    /// The variables now, all owners together (owners are kept apart by name, so one never
    /// sets another's key: each module owns the keys it sets).
    public var current: Snapshot {
        state.withLock { Snapshot(generation: $0.generation, variables: $0.merged) }
    }

    /// Replaces what `owner` adds (an empty set removes it); the generation moves on only
    /// when that changes anything.
    public func set(_ variables: [String: String], for owner: String) {
        state.withLock { s in
            guard (s.owners[owner] ?? [:]) != variables else { return }
            s.owners[owner] = variables.isEmpty ? nil : variables
            var merged: [String: String] = [:]
            for name in s.owners.keys.sorted() {
                for (key, value) in s.owners[name]! { merged[key] = value }
            }
            s.merged = merged
            s.generation &+= 1
        }
    }
}
