import NIOCore
import Synchronization

/// One request's connection, so that its deadlines and its task's cancellation can close it
/// from outside the event loop, and so that the caller can tell which of them ended it. Two
/// deadlines: the request's own, and until the connection is ready (the connect timeout,
/// which covers the proxy's and TLS's handshakes as well as TCP's).
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
        var timer: Scheduled<Void>?
        var setupTimer: Scheduled<Void>?
        var ready = false
        var end: End?
    }
    private let state = Mutex(State())

    /// A connection attempt, closed at once if the request was already cancelled.
    func attempt(_ channel: any Channel) {
        let cancelled = state.withLock { s -> Bool in
            if s.end != .cancelled { s.attempts.append(channel) }
            return s.end == .cancelled
        }
        if cancelled { channel.close(promise: nil) }
    }

    /// Records the connection and closes it at `deadline`, or at `setupDeadline` unless it is
    /// ready by then; closes it at once if the request was already cancelled.
    func opened(_ channel: any Channel, deadline: NIODeadline, setupDeadline: NIODeadline) {
        let timer = channel.eventLoop.scheduleTask(deadline: deadline) { self.expire(.deadline) }
        let setupTimer = channel.eventLoop.scheduleTask(deadline: setupDeadline) { self.expire(.setup) }
        let (cancelled, ready) = state.withLock { s -> (Bool, Bool) in
            s.attempts = []
            s.channel = channel
            s.timer = timer
            s.setupTimer = s.ready ? nil : setupTimer
            return (s.end == .cancelled, s.ready)
        }
        if ready { setupTimer.cancel() }
        if cancelled {
            timer.cancel()
            setupTimer.cancel()
            channel.close(promise: nil)
        }
    }

    /// The connection is ready (TLS's handshake done, or the proxy's connect for plain http):
    /// the connect timeout no longer applies. May come before ``opened(_:deadline:setupDeadline:)``.
    func setupFinished() {
        let timer = state.withLock { s -> Scheduled<Void>? in
            s.ready = true
            defer { s.setupTimer = nil }
            return s.setupTimer
        }
        timer?.cancel()
    }

    /// The deadlines no longer apply (the head arrived for a head-only one, or the exchange
    /// is over).
    func stopTimer() {
        let timers = state.withLock { s -> [Scheduled<Void>] in
            defer {
                s.timer = nil
                s.setupTimer = nil
            }
            return [s.timer, s.setupTimer].compactMap { $0 }
        }
        for timer in timers { timer.cancel() }
    }

    private func expire(_ end: End) {
        let channel = state.withLock { s -> (any Channel)? in
            if s.end == nil { s.end = end }
            return s.channel
        }
        channel?.close(promise: nil)
    }

    func cancel() {
        let (channels, timers) = state.withLock { s -> ([any Channel], [Scheduled<Void>]) in
            if s.end == nil { s.end = .cancelled }
            defer {
                s.attempts = []
                s.timer = nil
                s.setupTimer = nil
            }
            return (s.attempts + (s.channel.map { [$0] } ?? []), [s.timer, s.setupTimer].compactMap { $0 })
        }
        for timer in timers { timer.cancel() }
        for channel in channels { channel.close(promise: nil) }
    }

    /// The error for what ended the request, if a deadline or a cancellation did.
    var ending: (any Error)? {
        switch state.withLock({ $0.end }) {
        case nil: nil
        case .deadline: CheckedHTTPError.timedOut
        case .setup: CheckedHTTPError.setupTimedOut
        case .cancelled: CancellationError()
        }
    }
}
