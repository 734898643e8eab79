/// Client side of dRPC calls, one call per transport as the reference agent does (a fresh
/// yamux stream per call, so the dRPC stream ID is always 1).
///
/// These read the transport from the calling task (pull mode): for a transport of its own,
/// such as one unix-socket connection per call. The control-plane session calls through
/// `YamuxSession.unaryCall` (AgentRPC) instead, which parses replies as they arrive on the
/// session's loop; both build their request with ``unaryRequest(_:_:)``.
public enum DRPCClient {
    /// Invoke + Message + CloseSend in one write, then the reply; half-closes afterwards.
    ///
    /// - Parameters:
    ///   - method: `/<package>.<Service>/<Method>`.
    ///   - request: the serialized protobuf request.
    ///   - maxMessageSize: largest reply accepted (4 MiB).
    nonisolated(nonsending) public static func unary(
        _ method: String, request: [UInt8], over transport: some DRPCTransport,
        maxMessageSize: Int = DRPCPacketAssembler.defaultMaxPacketSize
    ) async throws(DRPCCallError) -> [UInt8] {
        do {
            try await transport.write(unaryRequest(method, request))
        } catch {
            throw .transport("\(error)")
        }
        // Like the Go client, return on the reply without waiting for the server's
        // CloseSend; the half-close then ends the stream.
        var receiver = DRPCStreamReceiver(transport: transport, streamID: 1, maxMessageSize: maxMessageSize)
        let reply: [UInt8]?
        do {
            reply = try await receiver.receive()
        } catch {
            await transport.closeWrite()
            throw error
        }
        await transport.closeWrite()
        guard let reply else { throw .unexpectedEOF }
        return reply
    }

    /// A unary call's bytes: Invoke + Message + CloseSend on stream 1 (one write).
    public static func unaryRequest(_ method: String, _ request: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        DRPCPacket(streamID: 1, messageID: 1, kind: .invoke, data: Array(method.utf8)).encode(into: &out)
        DRPCPacket(streamID: 1, messageID: 2, kind: .message, data: request).encode(into: &out)
        DRPCPacket(streamID: 1, messageID: 3, kind: .closeSend).encode(into: &out)
        return out
    }

    /// Starts a streaming call (server-streaming or bidirectional) on `transport`.
    ///
    /// The Invoke leaves with the first message (or the CloseSend), as the reference does.
    /// The sender is the stream's only writer; the receiver its only reader; either may
    /// be handed to its own task. Cancel with ``DRPCStreamSender/cancel()``, which closes
    /// the transport (Coder leaves dRPC soft-cancel off).
    public static func stream<T: DRPCTransport>(
        _ method: String, over transport: T,
        maxMessageSize: Int = DRPCPacketAssembler.defaultMaxPacketSize
    ) -> (sender: DRPCStreamSender, receiver: DRPCStreamReceiver<T>) {
        let invoke = DRPCPacket(streamID: 1, messageID: 1, kind: .invoke, data: Array(method.utf8)).encoded()
        return (
            DRPCStreamSender(transport: transport, streamID: 1, firstMessageID: 2, pending: invoke),
            DRPCStreamReceiver(transport: transport, streamID: 1, maxMessageSize: maxMessageSize)
        )
    }
}
