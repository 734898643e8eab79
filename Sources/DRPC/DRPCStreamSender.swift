/// The sending half of one dRPC stream: the stream's single writer.
///
/// Sends are serialized, so the frames of one packet are contiguous on the transport even
/// when a large message waits for flow-control credit; message IDs increase by one per
/// packet; after CloseSend, an Error or a cancel nothing more is sent (``DRPCCallError/closed``).
public actor DRPCStreamSender {
    private let transport: any DRPCTransport
    private let streamID: UInt64
    private var nextMessageID: UInt64
    /// Bytes that must precede the first packet (the client's Invoke).
    private var pending: [UInt8]
    private var closed = false
    private var busy = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    init(transport: any DRPCTransport, streamID: UInt64, firstMessageID: UInt64, pending: [UInt8] = []) {
        self.transport = transport
        self.streamID = streamID
        self.nextMessageID = firstMessageID
        self.pending = pending
    }

    /// True once nothing more may be sent.
    public var isClosed: Bool { closed }

    /// Sends one message (a serialized protobuf).
    public func send(_ message: [UInt8]) async throws(DRPCCallError) {
        try await emit(.message, message, closing: false)
    }

    /// Half-closes: the peer's reads end; receiving continues.
    public func closeSend() async throws(DRPCCallError) {
        try await emit(.closeSend, [], closing: true)
    }

    /// Ends the stream with an error the peer receives as ``DRPCCallError/remote(_:)``.
    public func sendError(_ body: DRPCErrorBody) async throws(DRPCCallError) {
        try await emit(.error, body.encoded, closing: true)
    }

    /// Ends the call gracefully once the receiving side is done too: CloseSend if not yet
    /// sent, then the transport's graceful end (a yamux FIN).
    public func close() async {
        if !closed { try? await closeSend() }
        await transport.closeWrite()
    }

    /// Aborts the call: the transport is closed (the peer sees EOF), as the reference does
    /// without soft cancel.
    public func cancel() async {
        closed = true
        await transport.close()
    }

    private func emit(_ kind: DRPCKind, _ data: [UInt8], closing: Bool) async throws(DRPCCallError) {
        while busy { await withCheckedContinuation { waiters.append($0) } }
        guard !closed else { throw .closed }
        busy = true
        defer {
            busy = false
            if !waiters.isEmpty { waiters.removeFirst().resume() }
        }
        var out = pending
        pending = []
        DRPCPacket(streamID: streamID, messageID: nextMessageID, kind: kind, data: data).encode(into: &out)
        nextMessageID += 1
        if closing { closed = true }
        do {
            try await transport.write(out)
        } catch {
            closed = true
            throw .transport("\(error)")
        }
    }
}
