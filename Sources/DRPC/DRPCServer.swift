/// Serves unary dRPC methods on transports; routing is by exact `/<package>.<Service>/<Method>`.
///
/// One transport carries one call at a time (later calls use higher stream IDs), as
/// coderd serves each yamux stream. Unknown methods get the reference's answer, an Error
/// with code 0 and `protocol error: unknown rpc: "<name>"`, sent without reading the
/// request. A handler's thrown ``DRPCErrorBody`` is sent as is; any other error is sent
/// with code 0 and its description, as Coder's Go handlers do.
public struct DRPCServer: Sendable {
    public typealias UnaryHandler = @Sendable (_ request: [UInt8]) async throws -> [UInt8]

    private var handlers: [String: UnaryHandler] = [:]
    public let maxMessageSize: Int

    public init(maxMessageSize: Int = DRPCPacketAssembler.defaultMaxPacketSize) {
        self.maxMessageSize = maxMessageSize
    }

    /// Registers a unary method.
    public mutating func register(_ method: String, _ handler: @escaping UnaryHandler) {
        handlers[method] = handler
    }

    public var methods: [String] { handlers.keys.sorted() }

    /// Serves calls on `transport` until EOF or a protocol error (which closes it).
    public func serve(_ transport: some DRPCTransport) async {
        var reader = DRPCPacketReader(maxPacketSize: maxMessageSize)
        var active: (stream: UInt64, method: String, handler: UnaryHandler?, request: [UInt8]?)?
        var finishedStream: UInt64 = 0
        while true {
            let packet: DRPCPacket?
            do {
                packet = try reader.next()
            } catch {
                await transport.close()
                return
            }
            guard let packet else {
                guard let bytes = try? await transport.read() else {
                    await transport.closeWrite()
                    return
                }
                reader.feed(bytes)
                continue
            }
            if packet.streamID <= finishedStream { continue } // late packets of a finished call
            switch packet.kind {
            case .invokeMetadata:
                continue
            case .invoke:
                if active != nil {
                    // Invoke on an active stream: protocol error, transport closed.
                    await transport.close()
                    return
                }
                let method = String(decoding: packet.data, as: UTF8.self)
                guard let handler = handlers[method] else {
                    let reply = DRPCPacket(
                        streamID: packet.streamID, messageID: 1, kind: .error,
                        data: DRPCErrorBody.unknownRPC(method).encoded)
                    try? await transport.write(reply.encoded())
                    finishedStream = packet.streamID
                    continue
                }
                active = (packet.streamID, method, handler, nil)
            case .message:
                guard var call = active, call.stream == packet.streamID, call.request == nil else {
                    await transport.close()
                    return
                }
                call.request = packet.data
                active = call
            case .closeSend:
                guard let call = active, call.stream == packet.streamID else { continue }
                active = nil
                finishedStream = call.stream
                await respond(to: call.stream, request: call.request, handler: call.handler!, over: transport)
            case .close, .cancel, .error:
                if active?.stream == packet.streamID {
                    finishedStream = packet.streamID
                    active = nil
                }
            }
        }
    }

    private func respond(to stream: UInt64, request: [UInt8]?, handler: UnaryHandler, over transport: some DRPCTransport) async {
        var out: [UInt8] = []
        guard let request else {
            DRPCPacket(streamID: stream, messageID: 1, kind: .error, data: DRPCErrorBody(code: 0, message: "EOF").encoded)
                .encode(into: &out)
            try? await transport.write(out)
            return
        }
        do {
            let reply = try await handler(request)
            DRPCPacket(streamID: stream, messageID: 1, kind: .message, data: reply).encode(into: &out)
            DRPCPacket(streamID: stream, messageID: 2, kind: .closeSend).encode(into: &out)
        } catch let body as DRPCErrorBody {
            DRPCPacket(streamID: stream, messageID: 1, kind: .error, data: body.encoded).encode(into: &out)
        } catch {
            DRPCPacket(streamID: stream, messageID: 1, kind: .error, data: DRPCErrorBody(code: 0, message: "\(error)").encoded)
                .encode(into: &out)
        }
        try? await transport.write(out)
    }
}

extension DRPCErrorBody: Error {}
