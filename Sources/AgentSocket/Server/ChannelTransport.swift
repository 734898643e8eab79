import CoreMetrics
import DRPC
import NIOCore

/// A dRPC transport over one socket connection (the agent socket carries dRPC on the raw
/// stream). Used by the server for each connection and by the CLI.
///
/// Memory: NIO's async channel reads with back-pressure (it stops reading the socket while
/// its small buffer is full), so a connection holds at most that buffer plus what the dRPC
/// reader has assembled (one packet, at most 4 MiB).
///
/// A write the peer does not make room for within ``writeTimeout`` closes the connection: a
/// client that sends calls and reads none of the answers must not hold its call (and its
/// place among the connections) for ever.
public actor ChannelTransport: DRPCTransport {
    /// The default bound on one write's wait for the peer to read.
    public static let defaultWriteTimeout: Duration = .seconds(10)

    private let channel: any Channel
    private let writeTimeout: TimeAmount
    /// Taken out while a read is under way (an actor cannot lend it across a suspension);
    /// dRPC reads from one task, so a second concurrent read is a bug and fails.
    private var inbound: NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator?
    private let outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>

    private init(
        channel: any Channel, inbound: NIOAsyncChannelInboundStream<ByteBuffer>, outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>,
        writeTimeout: Duration
    ) {
        self.channel = channel
        self.writeTimeout = TimeAmount(writeTimeout)
        self.inbound = inbound.makeAsyncIterator()
        self.outbound = outbound
    }

    /// Runs `body` with a transport over `connection` (once per connection), inside NIO's
    /// scope for its streams: the connection is closed when `body` returns or throws.
    public static func using<Result: Sendable>(
        _ connection: NIOAsyncChannel<ByteBuffer, ByteBuffer>, writeTimeout: Duration = defaultWriteTimeout,
        _ body: (ChannelTransport) async throws -> Result
    ) async throws -> Result {
        try await connection.executeThenClose { inbound, outbound in
            try await body(ChannelTransport(channel: connection.channel, inbound: inbound, outbound: outbound, writeTimeout: writeTimeout))
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
        let channel = channel
        // Closing fails the waiting write, which ends the call and the serving.
        let deadline = channel.eventLoop.scheduleTask(in: writeTimeout) {
            SocketMetrics.disconnected("write_timeout").increment()
            channel.close(promise: nil)
        }
        defer { deadline.cancel() }
        try await outbound.write(ByteBuffer(bytes: bytes))
    }

    public nonisolated func closeWrite() async {
        outbound.finish()
    }

    public nonisolated func close() async {
        try? await channel.close()
    }
}
