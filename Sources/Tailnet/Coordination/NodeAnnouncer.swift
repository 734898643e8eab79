import Synchronization

/// The agent's current Node, with a change feed for each coordination stream: every stream
/// sends the latest node when it starts and again whenever it changes (`update_self` on every
/// change). A subscriber that falls behind sees only the latest
/// node (bounded: one pending value per subscriber).
public final class NodeAnnouncer: Sendable {
    private struct State {
        var node: SelfNode?
        var subscribers: [UInt64: AsyncStream<SelfNode>.Continuation] = [:]
        var next: UInt64 = 0
    }

    private let state = Mutex(State())

    public init() {}

    /// The node as it stands.
    public var current: SelfNode? { state.withLock { $0.node } }

    /// Changes the node; subscribers hear of it only if it changed. Before the first
    /// ``set(_:)`` there is nothing to change: the change is dropped.
    public func update(_ change: (inout SelfNode) -> Void) {
        let (node, subscribers) = state.withLock { s -> (SelfNode?, [AsyncStream<SelfNode>.Continuation]) in
            guard var node = s.node else { return (nil, []) }
            change(&node)
            guard node != s.node else { return (nil, []) }
            s.node = node
            return (node, Array(s.subscribers.values))
        }
        if let node { for subscriber in subscribers { subscriber.yield(node) } }
    }

    /// Sets the first node (or replaces it wholesale).
    public func set(_ node: SelfNode) {
        let subscribers = state.withLock { s -> [AsyncStream<SelfNode>.Continuation] in
            guard s.node != node else { return [] }
            s.node = node
            return Array(s.subscribers.values)
        }
        for subscriber in subscribers { subscriber.yield(node) }
    }

    /// The current node (if any) followed by each change, until the consuming task ends.
    public func updates() -> AsyncStream<SelfNode> {
        let (stream, continuation) = AsyncStream.makeStream(of: SelfNode.self, bufferingPolicy: .bufferingNewest(1))
        let id = state.withLock { s -> UInt64 in
            s.next += 1
            s.subscribers[s.next] = continuation
            if let node = s.node { continuation.yield(node) }
            return s.next
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }
}
