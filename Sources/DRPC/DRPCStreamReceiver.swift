/// The receiving half of one client-side dRPC stream: the transport's single reader.
public struct DRPCStreamReceiver<Transport: DRPCTransport>: Sendable {
    let transport: Transport
    let streamID: UInt64
    private var reader: DRPCPacketReader
    private var ended = false

    init(transport: Transport, streamID: UInt64, maxMessageSize: Int) {
        self.transport = transport
        self.streamID = streamID
        self.reader = DRPCPacketReader(maxPacketSize: maxMessageSize)
    }

    /// The next message, or nil once the server sent CloseSend (or Close). Throws the
    /// server's Error as ``DRPCCallError/remote(_:)``, ``DRPCCallError/remoteClosed(_:)``
    /// for Cancel, and ``DRPCCallError/unexpectedEOF`` when the transport ends first. A
    /// wire error closes the transport.
    nonisolated(nonsending) public mutating func receive() async throws(DRPCCallError) -> [UInt8]? {
        guard !ended else { return nil }
        while true {
            let packet: DRPCPacket?
            do {
                packet = try reader.next()
            } catch {
                ended = true
                await transport.close()
                throw .wire(error)
            }
            guard let packet else {
                let bytes: [UInt8]?
                do {
                    bytes = try await transport.read()
                } catch {
                    ended = true
                    throw .transport("\(error)")
                }
                guard let bytes else {
                    ended = true
                    throw .unexpectedEOF
                }
                reader.feed(bytes)
                continue
            }
            guard packet.streamID == streamID else { continue }
            switch DRPCReply(packet) {
            case .message(let data):
                return data
            case .end:
                ended = true
                return nil
            case .failure(let error, let closeTransport):
                ended = true
                if closeTransport { await transport.close() }
                throw error
            }
        }
    }
}
