import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOTLS
import Synchronization
import Testing

@testable import OutboundProxy

/// The request's deadlines as its handlers keep them, on an embedded event loop whose clock
/// the test moves: the request's deadline closes the connection unless the head came first
/// and it was the head's only; the connect timeout closes it unless it was ready first; and
/// neither outlives the connection.
@Suite struct ConnectionDeadlineTests {
    static let deadline = NIODeadline.uptimeNanoseconds(10_000_000_000)

    /// Counts `expired` calls.
    final class Expiries: Sendable {
        private let count = Mutex(0)
        var value: Int { count.withLock { $0 } }
        var call: @Sendable () -> Void { { self.count.withLock { $0 += 1 } } }
    }

    static func headHandler(headOnly: Bool, _ expiries: Expiries) throws -> (EmbeddedChannel, EventLoopFuture<HTTPResponseHead>) {
        let loop = EmbeddedEventLoop()
        let promise = loop.makePromise(of: HTTPResponseHead.self)
        let handler = ResponseHeadHandler()
        let channel = EmbeddedChannel(handler: handler, loop: loop)
        handler.begin(promise: promise, deadline: deadline, headOnly: headOnly, expired: expiries.call)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        return (channel, promise.futureResult)
    }

    @Test func theDeadlineClosesAConnectionWithoutAnAnswer() throws {
        let expiries = Expiries()
        let (channel, head) = try Self.headHandler(headOnly: false, expiries)
        channel.embeddedEventLoop.advanceTime(by: .seconds(9))
        #expect(channel.isActive && expiries.value == 0)
        channel.embeddedEventLoop.advanceTime(by: .seconds(2))
        #expect(!channel.isActive && expiries.value == 1)
        #expect(throws: CheckedHTTPError.incompleteAnswer) { try head.wait() }
    }

    /// A head-only deadline ends as the head arrives; a whole-answer one goes on.
    @Test(arguments: [true, false])
    func theHeadEndsOnlyAHeadOnlyDeadline(headOnly: Bool) throws {
        let expiries = Expiries()
        let (channel, head) = try Self.headHandler(headOnly: headOnly, expiries)
        try channel.writeInbound(HTTPClientResponsePart.head(HTTPResponseHead(version: .http1_1, status: .ok)))
        #expect(try head.wait().status == .ok)
        channel.embeddedEventLoop.advanceTime(by: .seconds(20))
        #expect(channel.isActive == headOnly)
        #expect(expiries.value == (headOnly ? 0 : 1))
        _ = try? channel.finish(acceptAlreadyClosed: true)
    }

    /// A whole answer that arrived in time is not cut by the deadline while the caller reads
    /// it or the connection closes (TLS's close waits for the server's `close_notify`).
    @Test func aWholeAnswerEndsTheDeadline() throws {
        let expiries = Expiries()
        let (channel, head) = try Self.headHandler(headOnly: false, expiries)
        try channel.writeInbound(HTTPClientResponsePart.head(HTTPResponseHead(version: .http1_1, status: .ok)))
        #expect(try head.wait().status == .ok)
        channel.embeddedEventLoop.advanceTime(by: .seconds(5))
        try channel.writeInbound(HTTPClientResponsePart.end(nil))
        channel.embeddedEventLoop.advanceTime(by: .seconds(20))
        #expect(channel.isActive && expiries.value == 0)
        _ = try? channel.finish(acceptAlreadyClosed: true)
    }

    /// What ended a request: the first deadline or cancellation, and nothing once the caller
    /// has its answer.
    @Test func theWatchKeepsTheFirstEndAndNoneAfterTheAnswer() {
        let watch = ConnectionWatch()
        #expect(watch.ending == nil)
        watch.expired(.setup)
        watch.expired(.deadline)
        watch.cancel()
        #expect(watch.ending as? CheckedHTTPError == .setupTimedOut)
        let answered = ConnectionWatch()
        answered.finish()
        answered.expired(.deadline)
        answered.cancel()
        #expect(answered.ending == nil)
    }

    /// A connection that ends before its deadline takes its timer with it.
    @Test func noTimerOutlivesTheConnection() throws {
        let expiries = Expiries()
        let (channel, head) = try Self.headHandler(headOnly: true, expiries)
        try channel.close().wait()
        #expect(throws: CheckedHTTPError.incompleteAnswer) { try head.wait() }
        channel.embeddedEventLoop.advanceTime(by: .seconds(20))
        #expect(expiries.value == 0)
    }

    /// The connect timeout: TLS's finished handshake (or, for plain http, the connection's
    /// `channelActive`, which a proxy's handshake holds back until it is done) ends it;
    /// otherwise it closes the connection.
    @Test(arguments: [true, false])
    func theConnectTimeoutEndsWhenTheConnectionIsReady(tls: Bool) throws {
        for ready in [true, false] {
            let expiries = Expiries()
            let loop = EmbeddedEventLoop()
            let channel = EmbeddedChannel(handler: ConnectionSetupHandler(tls: tls, deadline: Self.deadline, expired: expiries.call), loop: loop)
            if ready || tls { try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait() }
            if ready && tls { channel.pipeline.fireUserInboundEventTriggered(TLSUserEvent.handshakeCompleted(negotiatedProtocol: nil)) }
            loop.advanceTime(by: .seconds(20))
            #expect(expiries.value == (ready ? 0 : 1), "tls \(tls), ready \(ready)")
            #expect(channel.isActive == ready || !(ready || tls), "the timer closes an unready connection")
            _ = try? channel.finish(acceptAlreadyClosed: true)
        }
    }
}
