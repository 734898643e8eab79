import DRPC
import NIOCore

/// A dRPC transport over one socket connection (the agent socket carries dRPC on the raw
/// stream). Used by the server for each connection and by the CLI.
///
/// Memory: NIO's async channel reads with back-pressure (it stops reading the socket while
/// its small buffer is full), so a connection holds at most that buffer plus what the dRPC
/// reader has assembled (one packet, at most 4 MiB).
public actor ChannelTransport: DRPCTransport {
    private let channel: any Channel
    /// Taken out while a read is under way (an actor cannot lend it across a suspension);
    /// dRPC reads from one task, so a second concurrent read is a bug and fails.
    private var inbound: NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator?
    private let outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>

    private init(
        channel: any Channel, inbound: NIOAsyncChannelInboundStream<ByteBuffer>, outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>
    ) {
        self.channel = channel
        self.inbound = inbound.makeAsyncIterator()
        self.outbound = outbound
    }

    /// Runs `body` with a transport over `connection` (once per connection), inside NIO's
    /// scope for its streams: the connection is closed when `body` returns or throws.
    public static func using<Result: Sendable>(
        _ connection: NIOAsyncChannel<ByteBuffer, ByteBuffer>, _ body: (ChannelTransport) async throws -> Result
    ) async throws -> Result {
        try await connection.executeThenClose { inbound, outbound in
            try await body(ChannelTransport(channel: connection.channel, inbound: inbound, outbound: outbound))
        }
    }

    public nonisolated func read() async throws -> [UInt8]? {
        try await readNext()
    }

    private func readNext() async throws -> [UInt8]? {
        guard var iterator = inbound else { throw ChannelError.inappropriateOperationForState }
        inbound = nil
        defer { inbound = iterator }
        guard var buffer = try await iterator.next(isolation: #isolation) else { return nil }
        return buffer.readBytes(length: buffer.readableBytes)
    }

    public nonisolated func write(_ bytes: [UInt8]) async throws {
        try await outbound.write(ByteBuffer(bytes: bytes))
    }

    public nonisolated func closeWrite() async {
        outbound.finish()
    }

    public nonisolated func close() async {
        try? await channel.close()
    }
}
