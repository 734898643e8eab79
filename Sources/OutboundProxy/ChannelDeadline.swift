import NIOCore

/// A deadline a connection's handler keeps on its event loop: at it `expired` runs and the
/// connection closes, unless the handler stops it first. Loop-bound, like its handler.
struct ChannelDeadline {
    private var timer: Scheduled<Void>?

    /// Starts the timer for `context`'s connection (on its loop: no wake-up of another thread).
    mutating func start(_ context: ChannelHandlerContext, at deadline: NIODeadline, expired: @escaping @Sendable () -> Void) {
        let channel = context.channel
        timer = context.eventLoop.scheduleTask(deadline: deadline) {
            expired()
            channel.close(promise: nil)
        }
    }

    /// The deadline no longer applies.
    mutating func stop() {
        timer?.cancel()
        timer = nil
    }
}
