import Synchronization

/// Tells blocking work that it should stop: its client went away, or it ran past its
/// deadline. Long loops (hashing, matching, tree walks) call ``check()`` every few
/// thousand steps; a job still queued in a ``BlockingPool`` is dropped without running.
public final class CancelToken: Sendable {
    /// Why the work was stopped.
    public enum Reason: Sendable, Equatable {
        case cancelled
        case deadline
    }

    /// Thrown by ``check()``.
    public struct Stopped: Error, Sendable, Equatable {
        public var reason: Reason
        public init(reason: Reason) { self.reason = reason }
    }

    private struct State {
        var reason: Reason?
        var handlers: [UInt64: @Sendable () -> Void] = [:]
        var nextHandler: UInt64 = 0
    }

    private let state = Mutex(State())
    /// The instant past which ``check()`` throws ``Reason/deadline``; nil for none.
    public let deadline: ContinuousClock.Instant?

    public init(deadline: ContinuousClock.Instant? = nil) {
        self.deadline = deadline
    }

    /// A token whose deadline is `budget` from now.
    public convenience init(budget: Duration) {
        self.init(deadline: .now + budget)
    }

    /// Stops the work (idempotent); handlers registered with ``onCancel(_:)`` run once.
    public func cancel() {
        let handlers = state.withLock { s -> [@Sendable () -> Void] in
            guard s.reason == nil else { return [] }
            s.reason = .cancelled
            defer { s.handlers = [:] }
            return Array(s.handlers.values)
        }
        for handler in handlers { handler() }
    }

    /// Why the work must stop, or nil while it may go on.
    public var stopReason: Reason? {
        if let reason = state.withLock({ $0.reason }) { return reason }
        if let deadline, ContinuousClock.now >= deadline { return .deadline }
        return nil
    }

    public var isStopped: Bool { stopReason != nil }

    /// Throws when the work must stop.
    public func check() throws(Stopped) {
        if let reason = stopReason { throw Stopped(reason: reason) }
    }

    /// Runs `handler` when ``cancel()`` is called (at once if it was); returns a key for
    /// ``removeHandler(_:)``, or nil when it already ran.
    @discardableResult
    public func onCancel(_ handler: @escaping @Sendable () -> Void) -> UInt64? {
        let key = state.withLock { s -> UInt64? in
            guard s.reason != .cancelled else { return nil }
            s.nextHandler += 1
            s.handlers[s.nextHandler] = handler
            return s.nextHandler
        }
        if key == nil { handler() }
        return key
    }

    public func removeHandler(_ key: UInt64?) {
        guard let key else { return }
        state.withLock { s in _ = s.handlers.removeValue(forKey: key) }
    }
}

extension CancelToken {
    /// A token cancelled when `signal` reports (a client that went away); the returned
    /// registration must be cancelled when the work ends.
    public static func cancelled(by signal: any GoneSignal, budget: Duration?) -> (CancelToken, GoneRegistration) {
        let token = budget.map { CancelToken(budget: $0) } ?? CancelToken()
        let registration = signal.whenGone { token.cancel() }
        return (token, registration)
    }
}
