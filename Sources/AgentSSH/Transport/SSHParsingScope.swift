import NIOCore
import NIOPosix

/// The connection whose bytes swift-nio-ssh is parsing on this thread, for the cipher and
/// ``SSHMessageRewriter`` (created by swift-nio-ssh with keys only, they cannot be handed
/// the connection): set around each read by ``SSHParsingScopeHandler``, just before
/// swift-nio-ssh's handler, which parses synchronously inside the read.
final class SSHParsingScope: Sendable {
    let policy: SSHPolicy
    /// The connection's rekey gate; the cipher keeps it from its creation (inside a read).
    let rekey: NIOLoopBound<SSHRekeyGate>?

    init(policy: SSHPolicy, rekey: NIOLoopBound<SSHRekeyGate>? = nil) {
        self.policy = policy
        self.rekey = rekey
    }

    static let current = ThreadSpecificVariable<SSHParsingScope>()

    /// The policy of the connection being parsed on this thread, if any.
    static var currentPolicy: SSHPolicy? { current.currentValue?.policy }

    /// The rekey gate of the connection being parsed on this thread, if any.
    static var currentRekey: NIOLoopBound<SSHRekeyGate>? { current.currentValue?.rekey }
}

/// Puts its connection's ``SSHParsingScope`` in place for the length of each read, and
/// after a read feeds the rekey's deferred packets back (``SSHRekeyGate``).
final class SSHParsingScopeHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let scope: SSHParsingScope
    let gate: SSHRekeyGate

    init(policy: SSHPolicy, loop: any EventLoop) {
        gate = SSHRekeyGate()
        scope = SSHParsingScope(policy: policy, rekey: NIOLoopBound(gate, eventLoop: loop))
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        SSHParsingScope.current.currentValue = scope
        context.fireChannelRead(data)
        SSHParsingScope.current.currentValue = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        context.fireChannelInactive()
        gate.connectionClosed()
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.fireChannelReadComplete()
        guard let markers = gate.readComplete(allocator: context.channel.allocator) else { return }
        channelRead(context: context, data: wrapInboundOut(markers))
        context.fireChannelReadComplete()
        // The fed-back read may have finished the exchange (a client that did not wait).
        _ = gate.readComplete(allocator: context.channel.allocator)
    }
}
