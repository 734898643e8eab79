import NIOCore
import NIOPosix

/// A NIO listener on an ephemeral 127.0.0.1 port whose accepted connections `serve` sets up
/// (the servers that take channels: SSH, the reconnecting PTY, the speed test).
public struct LoopbackListener: Sendable {
    public let channel: any Channel
    public var port: Int { channel.localAddress?.port ?? 0 }

    public init(serve: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>) async throws {
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in serve(channel) }
            .bind(host: "127.0.0.1", port: 0).get()
    }

    public func close() async {
        try? await channel.close()
    }
}
