import NIOCore
import NIOPosix

/// The policy of the connection whose bytes swift-nio-ssh is parsing on this thread, for
/// ``SSHMessageRewriter`` (created by swift-nio-ssh with keys only, it cannot be handed the
/// connection's policy): set around each read by ``SSHParsingScopeHandler``, just before
/// swift-nio-ssh's handler, which parses synchronously inside the read.
final class SSHParsingScope: Sendable {
    let policy: SSHPolicy

    init(policy: SSHPolicy) { self.policy = policy }

    static let current = ThreadSpecificVariable<SSHParsingScope>()

    /// The policy of the connection being parsed on this thread, if any.
    static var currentPolicy: SSHPolicy? { current.currentValue?.policy }
}

/// Puts its connection's ``SSHParsingScope`` in place for the length of each read.
final class SSHParsingScopeHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let scope: SSHParsingScope

    init(policy: SSHPolicy) { scope = SSHParsingScope(policy: policy) }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        SSHParsingScope.current.currentValue = scope
        context.fireChannelRead(data)
        SSHParsingScope.current.currentValue = nil
    }
}
