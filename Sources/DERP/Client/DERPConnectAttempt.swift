import NIOCore
import Synchronization

/// One connection attempt's outcome, completed once by whoever knows first: the
/// handshake, a refused upgrade, the deadline, a cancellation or the channel closing.
/// A failed attempt closes its channel, whenever that channel shows up.
final class DERPConnectAttempt: Sendable {
    private struct State {
        var done = false
        var failed = false
        var channel: (any Channel)?
    }

    private let promise: EventLoopPromise<DERPConnection>
    private let state = Mutex(State())

    init(promise: EventLoopPromise<DERPConnection>) {
        self.promise = promise
    }

    var future: EventLoopFuture<DERPConnection> { promise.futureResult }

    /// Records the attempt's channel, so that failing the attempt closes it (at once if
    /// it already failed).
    func opened(_ channel: any Channel) {
        let failed = state.withLock { s -> Bool in
            s.channel = channel
            return s.failed
        }
        if failed { channel.close(promise: nil) }
    }

    func succeed(_ connection: DERPConnection) {
        let first = state.withLock { s -> Bool in
            defer { s.done = true }
            return !s.done
        }
        if first { promise.succeed(connection) }
    }

    /// Fails the attempt (first caller wins) and closes its channel.
    func fail(_ error: DERPConnectError) {
        let (first, channel) = state.withLock { s -> (Bool, (any Channel)?) in
            guard !s.done else { return (false, nil) }
            s.done = true
            s.failed = true
            return (true, s.channel)
        }
        guard first else { return }
        promise.fail(error)
        channel?.close(promise: nil)
    }
}
