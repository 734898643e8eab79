import Synchronization

/// Open things (connections) by identity, at most ``capacity`` at once: what a server that
/// takes channels admits, counts and closes at shutdown.
///
/// Memory: at most ``capacity`` entries.
public final class BoundedRegistry<Value: Sendable>: Sendable {
    public let capacity: Int
    private let members = Mutex<[ObjectIdentifier: Value]>([:])

    public init(capacity: Int) {
        self.capacity = capacity
    }

    /// Adds `value` under `id`; false (and nothing added) at the capacity.
    public func admit(_ id: ObjectIdentifier, _ value: Value) -> Bool {
        members.withLock { members in
            guard members.count < capacity else { return false }
            members[id] = value
            return true
        }
    }

    public func remove(_ id: ObjectIdentifier) {
        _ = members.withLock { $0.removeValue(forKey: id) }
    }

    /// Every member now.
    public var all: [Value] { members.withLock { Array($0.values) } }

    public var count: Int { members.withLock { $0.count } }
}
