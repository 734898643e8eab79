import Synchronization

/// Subscribers that each get the latest value (when there is one and it is replayed), then
/// each newer one, buffering only the newest unread: a slow subscriber skips values, never
/// holds more than one. At most `maxSubscribers` at a time; a subscription beyond it, or
/// after ``finish()``, is a stream that has already ended. Cancelling the consumer
/// unsubscribes.
///
/// Memory: the latest value and at most `maxSubscribers` streams of one value each.
public final class LatestValueBroadcast<Value: Sendable>: Sendable {
    private struct State {
        var latest: Value?
        var subscribers: [UInt64: AsyncStream<Value>.Continuation] = [:]
        var nextID: UInt64 = 0
        var finished = false
    }

    public let maxSubscribers: Int
    /// Whether a new subscriber is given the latest value first.
    private let replaysLatest: Bool
    private let state = Mutex(State())

    public init(maxSubscribers: Int, replaysLatest: Bool = true) {
        self.maxSubscribers = maxSubscribers
        self.replaysLatest = replaysLatest
    }

    /// The last value published.
    public var latest: Value? { state.withLock { $0.latest } }

    public var subscriberCount: Int { state.withLock { $0.subscribers.count } }

    /// Makes `value` the latest and hands it to every subscriber. Under the lock, so a new
    /// subscriber gets either it as its first value or the one before it and then it.
    public func publish(_ value: Value) {
        state.withLock { s in
            guard !s.finished else { return }
            s.latest = value
            for subscriber in s.subscribers.values { subscriber.yield(value) }
        }
    }

    public func subscribe() -> AsyncStream<Value> {
        let (stream, continuation) = AsyncStream<Value>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let id = state.withLock { s -> UInt64? in
            guard !s.finished, s.subscribers.count < maxSubscribers else { return nil }
            s.nextID += 1
            s.subscribers[s.nextID] = continuation
            if replaysLatest, let latest = s.latest { continuation.yield(latest) }
            return s.nextID
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            self?.state.withLock { s in _ = s.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    /// Ends every subscription and refuses new ones.
    public func finish() {
        let subscribers = state.withLock { s -> [AsyncStream<Value>.Continuation] in
            s.finished = true
            defer { s.subscribers.removeAll() }
            return Array(s.subscribers.values)
        }
        // Outside the lock: finishing runs each stream's onTermination, which takes it.
        for subscriber in subscribers { subscriber.finish() }
    }
}
