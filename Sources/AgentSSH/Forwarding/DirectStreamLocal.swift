import NIOCore
import NIOPosix
import NIOSSH

/// `ssh -L` to a Unix socket (`direct-streamlocal@openssh.com`, marked by
/// ``SSHMessageRewriter``): connects to the socket in the workspace and carries the bytes
/// both ways. A failed connect refuses the channel.
enum DirectStreamLocal {
    /// Routes a marked `direct-tcpip` channel; nil when `target` is a plain TCP one.
    static func route(_ child: any Channel, to target: SSHChannelType.DirectTCPIP, policy: SSHPolicy) -> EventLoopFuture<Void>? {
        guard SSHExtensionMarker.isMarked(target.targetHost) else { return nil }
        guard let path = SSHExtensionMarker.streamLocalPath(target.targetHost) else {
            return child.eventLoop.makeFailedFuture(SSHServerError.unsupportedChannelType)
        }
        guard !policy.blockLocalPortForwarding else {
            return child.eventLoop.makeFailedFuture(SSHServerError.portForwardingDisabled)
        }
        return open(child, path: path)
    }

    static func open(_ child: any Channel, path: String) -> EventLoopFuture<Void> {
        guard !path.isEmpty, path.utf8.count < 108 else {
            return child.eventLoop.makeFailedFuture(ReverseForwardingError.invalidPath)
        }
        _ = child.setOption(ChannelOptions.allowRemoteHalfClosure, value: true)
        return ClientBootstrap(group: child.eventLoop)
            .connectTimeout(DirectTCPIP.connectTimeout)
            .channelOption(.allowRemoteHalfClosure, value: true)
            .connect(unixDomainSocketPath: path)
            .flatMapThrowing { socket in try ChannelGlue.join(ssh: child, tcp: socket) }
    }
}
