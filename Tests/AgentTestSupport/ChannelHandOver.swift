import AgentCore
import AgentHTTP
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// Hands one end of a socketpair to the HTTP API as a NIO channel, the way the tailnet hands
/// over each tunnel connection: tests drive handed-over connections through plain sockets.
public enum ChannelHandOver {
    /// Adopts `descriptor` (owned from this call on) as a channel with remote half-closure
    /// allowed, as tunnel channels are, and lets `serve` set it up; rethrows its refusal, the
    /// descriptor then closed.
    public static func serve(
        descriptor: CInt, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        _ serve: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) async throws {
        let flags = fcntl(descriptor, F_GETFL)
        precondition(flags >= 0 && fcntl(descriptor, F_SETFL, flags | O_NONBLOCK) == 0, "fcntl failed: errno \(errno)")
        _ = try await ClientBootstrap(group: group)
            .channelOption(.allowRemoteHalfClosure, value: true)
            .channelInitializer { channel in serve(channel) }
            .withConnectedSocket(descriptor).get()
    }
}

extension ChannelAcceptor {
    /// Serves `descriptor` as a handed-over channel (``ChannelHandOver``).
    public func handOver(descriptor: CInt, listener: String, remote: String?) async throws {
        try await ChannelHandOver.serve(descriptor: descriptor) { channel in
            self.serve(channel, listener: listener, remote: remote)
        }
    }
}

extension AgentHTTPServing {
    /// Serves `descriptor` as a channel this server did not accept (``ChannelHandOver``).
    public func handOver(descriptor: CInt, listener: String, remote: String?) async throws {
        try await ChannelHandOver.serve(descriptor: descriptor) { channel in
            self.serve(channel, listener: listener, remote: remote)
        }
    }
}
