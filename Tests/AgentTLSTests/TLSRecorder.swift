import AgentTLS
import NIOCore
import NIOTLS
import Synchronization

/// The top of a test pipeline: keeps what TLS passes up (plaintext, events, errors) and
/// whether the channel ended, and can echo what it reads.
final class TLSRecorder: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    struct Seen {
        var bytes: [UInt8] = []
        var protocols: [String?] = []
        var errors: [any Error] = []
        var inactive = false
    }

    let seen = Mutex(Seen())
    let echo: Bool
    /// Written once, then the channel closed, at the end of the first request's head.
    let answer: String?

    init(echo: Bool = false, answer: String? = nil) {
        self.echo = echo
        self.answer = answer
    }

    var bytes: [UInt8] { seen.withLock { $0.bytes } }
    var count: Int { seen.withLock { $0.bytes.count } }
    var errors: [any Error] { seen.withLock { $0.errors } }
    var protocols: [String?] { seen.withLock { $0.protocols } }
    var inactive: Bool { seen.withLock { $0.inactive } }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        let headEnded = seen.withLock { seen in
            let before = seen.bytes.count
            seen.bytes += buffer.readableBytesView
            // Only an answering recorder looks for the head's end: the scan is per byte, and
            // megabytes of it in a debug build on a loaded host took longer than the tests wait.
            return answer != nil && Self.headEnd(seen.bytes, from: max(0, before - 3))
        }
        if echo { context.writeAndFlush(wrapOutboundOut(buffer), promise: nil) }
        if let answer, headEnded {
            context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: answer)), promise: nil)
            context.close(promise: nil)
        }
    }

    /// Whether `bytes` hold a blank line at or after `start`.
    private static func headEnd(_ bytes: [UInt8], from start: Int) -> Bool {
        guard bytes.count >= 4 else { return false }
        return (start...(bytes.count - 4)).contains { bytes[$0..<($0 + 4)].elementsEqual([13, 10, 13, 10]) }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted(let negotiated) = event { seen.withLock { $0.protocols.append(negotiated) } }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        seen.withLock { $0.errors.append(error) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        seen.withLock { $0.inactive = true }
    }
}

/// Below TLS (first in the pipeline): closes the socket without TLS's close_notify, as a
/// peer that drops the connection does.
final class SocketCutter: ChannelOutboundHandler, Sendable {
    typealias OutboundIn = ByteBuffer
    private let context = Mutex<NIOLoopBound<ChannelHandlerContext>?>(nil)

    func handlerAdded(context: ChannelHandlerContext) {
        self.context.withLock { $0 = NIOLoopBound(context, eventLoop: context.eventLoop) }
    }

    /// Closes the socket from below the TLS handler.
    func cut() {
        guard let bound = context.withLock({ $0 }) else { return }
        bound.eventLoop.execute { bound.value.close(promise: nil) }
    }
}

/// Writes `text` when the handshake completes, as a caller that waits for it does.
final class WriteOnHandshake: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    let text: String

    init(_ text: String) { self.text = text }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted = event { context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: text)), promise: nil) }
        context.fireUserInboundEventTriggered(event)
    }
}
