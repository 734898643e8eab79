import NIOCore

/// Answers a relay's pings (DERP Ping frames, WebSocket pings) without letting a relay that
/// sends pings and reads nothing grow the connection's pending writes: at most
/// ``maxUnwritten`` answers wait to be written; a ping beyond that is not answered (counted
/// by the caller). One answer written is all a relay needs to know the client is alive.
/// Used on its channel's event loop only (a class: a write that completes at once calls back
/// into it while it sends).
final class PingAnswers {
    static let maxUnwritten = 4
    private var unwritten = 0

    /// Writes and flushes `answer` if fewer than ``maxUnwritten`` wait; false if not sent.
    func send(_ answer: NIOAny, context: ChannelHandlerContext) -> Bool {
        guard unwritten < Self.maxUnwritten else { return false }
        unwritten += 1
        let promise = context.eventLoop.makePromise(of: Void.self)
        promise.futureResult.assumeIsolated().whenComplete { [self] _ in unwritten -= 1 }
        context.writeAndFlush(answer, promise: promise)
        return true
    }
}
