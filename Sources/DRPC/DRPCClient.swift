/// Client side of dRPC unary calls, one call per transport as the reference agent does
/// (a fresh yamux stream per call, so the dRPC stream ID is always 1).
public enum DRPCClient {
    /// Invoke + Message + CloseSend in one write, then the reply; half-closes afterwards.
    ///
    /// - Parameters:
    ///   - method: `/<package>.<Service>/<Method>`.
    ///   - request: the serialized protobuf request.
    ///   - maxMessageSize: largest reply accepted (4 MiB).
    public static func unary(
        _ method: String, request: [UInt8], over transport: some DRPCTransport,
        maxMessageSize: Int = DRPCPacketAssembler.defaultMaxPacketSize
    ) async throws(DRPCCallError) -> [UInt8] {
        var out: [UInt8] = []
        DRPCPacket(streamID: 1, messageID: 1, kind: .invoke, data: Array(method.utf8)).encode(into: &out)
        DRPCPacket(streamID: 1, messageID: 2, kind: .message, data: request).encode(into: &out)
        DRPCPacket(streamID: 1, messageID: 3, kind: .closeSend).encode(into: &out)
        do {
            try await transport.write(out)
        } catch {
            throw .transport("\(error)")
        }
        var reader = DRPCPacketReader(maxPacketSize: maxMessageSize)
        var reply: [UInt8]?
        defer { Task { await transport.closeWrite() } }
        while true {
            let packet: DRPCPacket?
            do {
                packet = try reader.next()
            } catch {
                await transport.close()
                throw .wire(error)
            }
            guard let packet else {
                let bytes: [UInt8]?
                do {
                    bytes = try await transport.read()
                } catch {
                    throw .transport("\(error)")
                }
                guard let bytes else {
                    if let reply { return reply }
                    throw .unexpectedEOF
                }
                reader.feed(bytes)
                continue
            }
            guard packet.streamID == 1 else { continue }
            switch packet.kind {
            case .message:
                if reply != nil { throw .protocolViolation("more than one reply to a unary call") }
                reply = packet.data
            case .error:
                throw .remote(DRPCErrorBody(decoding: packet.data))
            case .closeSend, .close:
                if let reply { return reply }
                throw .unexpectedEOF
            case .cancel:
                throw .remote(DRPCErrorBody(code: 0, message: "context canceled"))
            case .invoke, .invokeMetadata:
                throw .protocolViolation("server sent \(packet.kind)")
            }
        }
    }
}
