import Logging
import Metrics
import NIOCore
import NIOSSH

/// Applies ``SSHConnectionTimeout`` to one connection: first in its pipeline, it notes each
/// read of the client's bytes and the authentication, sends the keepalive probes and closes
/// the connection when its timer finds the time up (or the handshake not done in time).
/// One timer per connection at a time; reads only move a timestamp.
final class SSHTimeoutHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private var timeout: SSHConnectionTimeout<ContinuousClock.Instant>
    private var timer: Scheduled<Void>?
    private let logger: Logger
    private static let closed = Counter(label: "agent_ssh_timeouts_total")
    private static let unauthenticated = Counter(label: "agent_ssh_handshake_timeouts_total")

    init(rule: SSHTimeoutRule, handshake: Duration? = nil, logger: Logger) {
        timeout = SSHConnectionTimeout(rule: rule, handshake: handshake, openedAt: .now)
        self.logger = logger
    }

    /// The client authenticated (on the connection's loop); the timer, when it next fires,
    /// goes by the rule alone.
    func authenticated() {
        timeout.authenticated()
    }

    func handlerAdded(context: ChannelHandlerContext) {
        check(context: context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        timeout.received(at: .now)
        context.fireChannelRead(data)
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        context.fireChannelInactive()
    }

    private func check(context: ChannelHandlerContext) {
        timer = nil
        switch timeout.check(at: .now) {
        case .idle:
            return
        case .closeUnauthenticated:
            Self.unauthenticated.increment()
            logger.info("ssh connection closed: no authentication within the handshake deadline")
            context.close(promise: nil)
        case .close:
            Self.closed.increment()
            logger.info("ssh connection closed: --ssh-max-timeout", metadata: ["rule": "\(timeout.rule)"])
            context.close(promise: nil)
        case .probe:
            // A `tcpip-forward` marked as keepalive: the rewriter sends `keepalive@openssh.com`;
            // the client's answer (success or failure) is bytes received.
            timeout.probed()
            if let ssh = try? context.pipeline.syncOperations.handler(type: NIOSSHHandler.self) {
                let answered = context.eventLoop.makePromise(of: GlobalRequest.TCPForwardingResponse?.self)
                answered.futureResult.whenFailure { _ in }
                ssh.sendTCPForwardingRequest(.listen(host: SSHExtensionMarker.keepalive, port: 0), promise: answered)
            }
            check(context: context)
        case .wake(let instant):
            // At most a day at a time (a far deadline is checked again then), so the
            // nanoseconds cannot overflow.
            let delay = min(ContinuousClock.now.duration(to: instant), .seconds(86_400))
            let (seconds, attoseconds) = delay.components
            let amount = TimeAmount.nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000 + 1)
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            timer = context.eventLoop.scheduleTask(in: amount) {
                let (handler, context) = bound.value
                handler.check(context: context)
            }
        }
    }
}
