import NIOCore
import NIOPosix
import NIOSSH

/// `ssh -L`: a `direct-tcpip` channel connects from the workspace to the host and port the
/// client names (any host the workspace can reach, as in the reference) and carries the
/// bytes both ways. A failed connect refuses the channel (the client sees the error).
enum DirectTCPIP {
    /// How long a connect may take before the channel is refused.
    static let connectTimeout: TimeAmount = .seconds(10)

    /// Connects `child` to its target; once joined, `jetbrains` (when given) watches whether
    /// the target is a JetBrains IDE's port.
    static func open(_ child: any Channel, to target: SSHChannelType.DirectTCPIP, jetbrains: JetBrainsForward? = nil) -> EventLoopFuture<Void> {
        // The port is a client's uint32: anything outside TCP's range is refused, never used.
        guard (1...65535).contains(target.targetPort) else {
            return child.eventLoop.makeFailedFuture(ReverseForwardingError.invalidPort)
        }
        _ = child.setOption(ChannelOptions.allowRemoteHalfClosure, value: true)
        return ClientBootstrap(group: child.eventLoop)
            .connectTimeout(connectTimeout)
            .channelOption(.allowRemoteHalfClosure, value: true)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connect(host: target.targetHost, port: target.targetPort)
            .flatMapThrowing { tcp in
                try ChannelGlue.join(ssh: child, tcp: tcp)
                jetbrains?.watch(child, port: UInt16(target.targetPort), origin: target.originatorAddress.ipAddress ?? "")
            }
    }
}
