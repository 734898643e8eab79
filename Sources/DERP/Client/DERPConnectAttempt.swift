import NIOCore
import Synchronization

/// One connection attempt's outcome, completed once by whoever knows first: the
/// handshake, a refused upgrade, the deadline, a cancellation or the channel closing.
final class DERPConnectAttempt: Sendable {
    private let promise: EventLoopPromise<DERPConnection>
    private let done = Mutex(false)
    private let channel = Mutex<(any Channel)?>(nil)

    init(promise: EventLoopPromise<DERPConnection>) {
        self.promise = promise
    }

    var future: EventLoopFuture<DERPConnection> { promise.futureResult }

    /// Records the attempt's channel, so that failing the attempt closes it.
    func opened(_ channel: any Channel) {
        let finished = done.withLock { $0 }
        self.channel.withLock { $0 = channel }
        if finished { channel.close(promise: nil) }
    }

    func succeed(_ connection: DERPConnection) {
        guard take() else { return }
        promise.succeed(connection)
    }

    /// Fails the attempt (first caller wins) and closes its channel.
    func fail(_ error: DERPConnectError) {
        guard take() else { return }
        promise.fail(error)
        channel.withLock { $0 }?.close(promise: nil)
    }

    var isDone: Bool { done.withLock { $0 } }

    private func take() -> Bool {
        done.withLock { d in
            defer { d = true }
            return !d
        }
    }
}
