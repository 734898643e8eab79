import AgentCore
import Synchronization

/// The unit dependency graph behind `exp sync`: units with a status,
/// "unit wants dependency" edges that require the dependency to reach a status, and each
/// unit's readiness. In memory only, one per agent.
///
/// Error texts are the reference's, so scripts that match on them keep working.
///
/// Memory: at most ``maxVertices`` units and dependency names of at most ``maxNameBytes``
/// bytes each, ``maxEdgesPerUnit`` edges per unit and ``maxEdges`` in all, and
/// ``maxWaiters`` tasks waiting for readiness; beyond that, calls fail with a clear error
/// (the reference has no bound: 200 calls with 4 MiB names held 880 MiB). So the graph
/// holds at most about (10 000 + 2 x 20 000) names of 256 bytes: under 20 MiB.
public final class UnitManager: Sendable {
    /// A registered unit's status (an unregistered one has none: `""` on the wire).
    public enum Status: String, Sendable, Equatable {
        case pending, started, completed
    }

    /// One outgoing edge of a unit, with the dependency's state now.
    public struct Dependency: Sendable, Equatable {
        public var unit: String
        public var dependsOn: String
        public var required: Status
        public var current: Status?
        public var isSatisfied: Bool { current == required }
    }

    /// A registered unit.
    public struct UnitInfo: Sendable, Equatable {
        public var unit: String
        public var status: Status
        public var isReady: Bool
    }

    /// A refused call; `description` is the reference's text.
    public struct Failure: Error, Equatable, CustomStringConvertible {
        public var description: String
        init(_ description: String) { self.description = description }
    }

    public static let maxVertices = 10_000
    public static let maxEdgesPerUnit = 1_000
    /// Dependency edges in the whole graph.
    public static let maxEdges = 20_000
    /// The longest unit (or dependency) name, in UTF-8 bytes.
    public static let maxNameBytes = 256
    public static let maxWaiters = 1_024

    private struct Unit {
        var status: Status
        var ready: Bool
    }

    private struct State {
        var units: [String: Unit] = [:]
        /// Every name the graph knows: registered units and bare dependency names.
        var vertices: Set<String> = []
        /// unit -> (dependency -> required status), in the order the edges were added.
        var edges: [String: [(dependsOn: String, required: Status)]] = [:]
        /// dependency -> units that want it.
        var dependents: [String: Set<String>] = [:]
        /// Tasks waiting for a unit to become ready.
        var waiters: [String: [UInt64: CheckedContinuation<Void, Never>]] = [:]
        var waiterCount = 0
        var nextWaiter: UInt64 = 0
        var edgeCount = 0
    }

    private let state = Mutex(State())

    public init() {}

    // MARK: Calls

    /// Refuses a name over ``maxNameBytes`` (the text does not repeat the name).
    public static func checkName(_ name: String) throws(Failure) {
        let bytes = name.utf8.count
        guard bytes <= maxNameBytes else { throw Failure("unit name is too long: \(bytes) bytes (limit \(maxNameBytes))") }
    }

    /// Registers `unit` as pending and ready (no dependencies yet).
    public func register(_ unit: String) throws(Failure) {
        try state.withLock { s throws(Failure) in try Self.register(unit, in: &s) }
    }

    private static func register(_ unit: String, in s: inout State) throws(Failure) {
        guard !unit.isEmpty else { throw Failure("unit name is required") }
        try checkName(unit)
        guard s.units[unit] == nil else { throw Failure("unit already registered") }
        guard s.vertices.contains(unit) || s.vertices.count < maxVertices else {
            throw Failure("too many units (limit \(maxVertices))")
        }
        s.units[unit] = Unit(status: .pending, ready: true)
        s.vertices.insert(unit)
    }

    /// Sets `unit`'s status and recomputes the readiness of every unit that wants it.
    public func updateStatus(_ unit: String, _ status: Status) throws(Failure) {
        let woken = try state.withLock { s throws(Failure) -> [CheckedContinuation<Void, Never>] in
            guard !unit.isEmpty else { throw Failure("updating status for unit \(goQuote(unit)): unit name is required") }
            guard let current = s.units[unit] else {
                throw Failure("unit \(goQuote(unit)) must be registered first: unit not found")
            }
            guard current.status != status else {
                throw Failure("checking status for unit \(goQuote(unit)): same status already set")
            }
            s.units[unit]!.status = status
            var woken: [CheckedContinuation<Void, Never>] = []
            for dependent in s.dependents[unit] ?? [] {
                woken += Self.recompute(dependent, in: &s)
            }
            return woken
        }
        for waiter in woken { waiter.resume() }
    }

    /// Adds the edge `unit` -> `dependsOn` requiring `required` (re-adding overwrites), unless
    /// it would close a cycle; recomputes `unit`'s readiness.
    public func addDependency(_ unit: String, dependsOn: String, required: Status) throws(Failure) {
        let woken = try state.withLock { s throws(Failure) -> [CheckedContinuation<Void, Never>] in
            guard !unit.isEmpty else { throw Failure("dependent name cannot be empty: unit name is required") }
            guard !dependsOn.isEmpty else { throw Failure("dependency name cannot be empty: unit name is required") }
            try Self.checkName(dependsOn)
            guard s.units[unit] != nil else {
                throw Failure("dependent unit \(goQuote(unit)) must be registered first: unit not found")
            }
            guard s.vertices.contains(dependsOn) || s.vertices.count < Self.maxVertices else {
                throw Failure("too many units (limit \(Self.maxVertices))")
            }
            // The dependency becomes a vertex even when the edge is refused, as the reference.
            s.vertices.insert(dependsOn)
            if unit == dependsOn || Self.pathExists(from: dependsOn, to: unit, in: s) {
                throw Failure(
                    "adding edge for unit \(goQuote(unit)): failed to add dependency\nadding edge (\(unit) -> \(dependsOn)): cycle detected")
            }
            var edges = s.edges[unit] ?? []
            if let index = edges.firstIndex(where: { $0.dependsOn == dependsOn }) {
                edges[index].required = required
            } else {
                guard edges.count < Self.maxEdgesPerUnit else {
                    throw Failure("too many dependencies for unit \(goQuote(unit)) (limit \(Self.maxEdgesPerUnit))")
                }
                guard s.edgeCount < Self.maxEdges else { throw Failure("too many dependencies (limit \(Self.maxEdges) in all)") }
                edges.append((dependsOn, required))
                s.edgeCount += 1
            }
            s.edges[unit] = edges
            s.dependents[dependsOn, default: []].insert(unit)
            return Self.recompute(unit, in: &s)
        }
        for waiter in woken { waiter.resume() }
    }

    /// Whether `unit` may start: every direct dependency has exactly its required status.
    /// An unregistered unit is ready.
    public func isReady(_ unit: String) throws(Failure) -> Bool {
        guard !unit.isEmpty else { throw Failure("unit ID cannot be empty: unit name is required") }
        return state.withLock { s in s.units[unit]?.ready ?? true }
    }

    /// The status (nil when unregistered), readiness and direct dependencies of `unit`.
    public func status(_ unit: String) -> (status: Status?, isReady: Bool, dependencies: [Dependency]) {
        state.withLock { s in
            let dependencies = (s.edges[unit] ?? []).map { edge in
                Dependency(unit: unit, dependsOn: edge.dependsOn, required: edge.required, current: s.units[edge.dependsOn]?.status)
            }
            return (s.units[unit]?.status, s.units[unit]?.ready ?? true, dependencies)
        }
    }

    /// Every registered unit (never a bare dependency name), sorted by name.
    public func list() -> [UnitInfo] {
        state.withLock { s in
            s.units.map { UnitInfo(unit: $0.key, status: $0.value.status, isReady: $0.value.ready) }.sorted { $0.unit < $1.unit }
        }
    }

    /// Returns once `unit` is ready (at once if it is, or is not registered), or when the
    /// task is cancelled. Throws when ``maxWaiters`` tasks already wait.
    public func waitUntilReady(_ unit: String) async throws(Failure) {
        // The slot is reserved here, under the same lock as the check, and given back when
        // the wait ends however it ends.
        let id: UInt64? = try state.withLock { s throws(Failure) -> UInt64? in
            if s.units[unit]?.ready ?? true { return nil }
            guard s.waiterCount < Self.maxWaiters else { throw Failure("too many waiting clients (limit \(Self.maxWaiters))") }
            s.nextWaiter += 1
            s.waiterCount += 1
            return s.nextWaiter
        }
        guard let id else { return }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { s -> Bool in
                    if s.units[unit]?.ready ?? true || Task.isCancelled {
                        s.waiterCount -= 1
                        return true
                    }
                    s.waiters[unit, default: [:]][id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
                guard let waiter = s.waiters[unit]?.removeValue(forKey: id) else { return nil }
                s.waiterCount -= 1
                if s.waiters[unit]?.isEmpty == true { s.waiters[unit] = nil }
                return waiter
            }
            waiter?.resume()
        }
    }

    /// Tasks waiting for readiness now.
    public var waiterCount: Int { state.withLock { $0.waiterCount } }

    // MARK: Graph

    /// Recomputes `unit`'s readiness; returns the waiters to wake if it became ready.
    private static func recompute(_ unit: String, in s: inout State) -> [CheckedContinuation<Void, Never>] {
        guard s.units[unit] != nil else { return [] }
        let ready = (s.edges[unit] ?? []).allSatisfy { s.units[$0.dependsOn]?.status == $0.required }
        s.units[unit]!.ready = ready
        guard ready, let waiters = s.waiters.removeValue(forKey: unit) else { return [] }
        s.waiterCount -= waiters.count
        return Array(waiters.values)
    }

    /// Whether `to` can be reached from `from` along edges (iterative, bounded by the graph).
    private static func pathExists(from: String, to: String, in s: State) -> Bool {
        var seen: Set<String> = [from]
        var stack = [from]
        while let next = stack.popLast() {
            if next == to { return true }
            for edge in s.edges[next] ?? [] where seen.insert(edge.dependsOn).inserted {
                stack.append(edge.dependsOn)
            }
        }
        return false
    }
}
