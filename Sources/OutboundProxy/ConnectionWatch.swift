import NIOCore
import Synchronization

/// One request's connection, so that its task's cancellation can close it from outside the
/// event loop, and so that the caller can tell what ended it: a deadline (whose timers the
/// connection's handlers own, on the event loop) or the cancellation.
final class ConnectionWatch: Sendable {
    /// What closed the connection, first.
    enum End {
        case deadline
        case setup
        case cancelled
    }

    private struct State {
        /// Connection attempts before one wins (one per address tried, at most).
        var attempts: [any Channel] = []
        var channel: (any Channel)?
        var end: End?
        /// The caller has its answer: what closes the connection now ends nothing.
        var finished = false
    }
    private let state = Mutex(State())

    /// A connection attempt, closed at once if the request already ended (a cancellation,
    /// or a deadline while an earlier address was tried).
    func attempt(_ channel: any Channel) {
        let ended = state.withLock { s -> Bool in
            if s.end == nil { s.attempts.append(channel) }
            return s.end != nil
        }
        if ended { channel.close(promise: nil) }
    }

    /// Records the connection that won; closes it at once if the request was already
    /// cancelled.
    func opened(_ channel: any Channel) {
        let cancelled = state.withLock { s -> Bool in
            s.attempts = []
            s.channel = channel
            return s.end == .cancelled
        }
        if cancelled { channel.close(promise: nil) }
    }

    /// A deadline closed (or is closing) the connection.
    func expired(_ end: End) {
        state.withLock { s in
            if s.end == nil, !s.finished { s.end = end }
        }
    }

    /// The caller has read its answer (the connection closes next, which for TLS may wait
    /// for the server's `close_notify`, or waits for the next request): a deadline or
    /// cancellation after this is not the request's failure, and closes nothing.
    /// What ended the request first, if a deadline or the cancellation did: checked and
    /// finished in one step, so a connection is never kept whose close one of them began.
    @discardableResult
    func finish() -> (any Error)? {
        let end = state.withLock { s -> End? in
            s.finished = true
            s.channel = nil
            s.attempts = []
            return s.end
        }
        return end.map(Self.error)
    }

    func cancel() {
        let channels = state.withLock { s -> [any Channel] in
            if s.end == nil, !s.finished { s.end = .cancelled }
            defer { s.attempts = [] }
            return s.attempts + (s.channel.map { [$0] } ?? [])
        }
        for channel in channels { channel.close(promise: nil) }
    }

    /// The error for what ended the request, if a deadline or a cancellation did.
    var ending: (any Error)? {
        state.withLock { $0.end }.map(Self.error)
    }

    private static func error(_ end: End) -> any Error {
        switch end {
        case .deadline: CheckedHTTPError.timedOut
        case .setup: CheckedHTTPError.setupTimedOut
        case .cancelled: CancellationError()
        }
    }
}
