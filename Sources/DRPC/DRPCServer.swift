/// Serves dRPC methods on transports; routing is by exact `/<package>.<Service>/<Method>`.
///
/// One transport carries one call at a time (later calls use higher stream IDs), as
/// coderd serves each yamux stream. Unknown methods get the reference's answer, an Error
/// with code 0 and `protocol error: unknown rpc: "<name>"`, sent without reading the
/// request. A handler's thrown ``DRPCErrorBody`` is sent as is; any other error is sent
/// with code 0 and its description, as Coder's Go handlers do.
public struct DRPCServer: Sendable {
    /// A unary method; runs on the serving task's executor.
    public typealias UnaryHandler = nonisolated(nonsending) @Sendable (_ request: [UInt8]) async throws -> [UInt8]
    /// A streaming method (server-streaming or bidirectional). Returning sends CloseSend;
    /// throwing sends an Error.
    public typealias StreamHandler = @Sendable (_ call: DRPCServerCall) async throws -> Void

    private enum Handler {
        case unary(UnaryHandler)
        case stream(StreamHandler)
    }

    private var handlers: [String: Handler] = [:]
    public let maxMessageSize: Int

    public init(maxMessageSize: Int = DRPCPacketAssembler.defaultMaxPacketSize) {
        self.maxMessageSize = maxMessageSize
    }

    /// Registers a unary method.
    public mutating func register(_ method: String, _ handler: @escaping UnaryHandler) {
        handlers[method] = .unary(handler)
    }

    /// Registers a streaming method.
    public mutating func registerStream(_ method: String, _ handler: @escaping StreamHandler) {
        handlers[method] = .stream(handler)
    }

    public var methods: [String] { handlers.keys.sorted() }

    private struct StreamingCall {
        let stream: UInt64
        let inbox: DRPCInbox
        let sender: DRPCStreamSender
        let task: Task<Void, Never>
    }

    /// How serving a transport ended.
    public enum End: Sendable, Equatable {
        /// The peer closed (or the transport failed); a streaming call still running was
        /// cancelled, as nobody is left to read its answer.
        case endOfStream
        /// The peer broke the dRPC rules; the transport was closed.
        case protocolError(String)
    }

    /// Serves calls on `transport` until EOF or a protocol error (which closes it);
    /// `observer` hears whether the stream is mid-frame and when calls begin and end.
    @discardableResult
    nonisolated(nonsending) public func serve(_ transport: some DRPCTransport, observer: (any DRPCServingObserver)? = nil) async -> End {
        var reader = DRPCPacketReader(maxPacketSize: maxMessageSize)
        var unary: (stream: UInt64, handler: UnaryHandler, request: [UInt8]?)?
        var streaming: StreamingCall?
        var finishedStream: UInt64 = 0
        var framesReported: UInt64 = 0

        func abort() async {
            if let streaming {
                streaming.task.cancel()
                await streaming.inbox.finish(.failure(.unexpectedEOF))
                await streaming.task.value
            }
            await transport.close()
        }

        while true {
            let packet: DRPCPacket?
            do {
                packet = try reader.next()
            } catch {
                await abort()
                return .protocolError("\(error)")
            }
            guard let packet else {
                observer?.decoded(midFrame: reader.isMidFrame, endedAFrame: reader.framesDecoded != framesReported)
                framesReported = reader.framesDecoded
                guard let bytes = try? await transport.read() else {
                    if let streaming {
                        streaming.task.cancel()
                        await streaming.inbox.finish(.failure(.unexpectedEOF))
                        await streaming.task.value
                    }
                    await transport.closeWrite()
                    return .endOfStream
                }
                reader.feed(bytes)
                continue
            }
            if packet.streamID <= finishedStream { continue }  // late packets of a finished call
            switch packet.kind {
            case .invokeMetadata:
                continue
            case .invoke:
                if unary?.stream == packet.streamID || streaming?.stream == packet.streamID {
                    // Invoke on an active stream: protocol error, transport closed.
                    await abort()
                    return .protocolError("invoke on the active stream \(packet.streamID)")
                }
                // One call at a time: a newer stream supersedes an unfinished one.
                unary = nil
                if let previous = streaming {
                    // Cancelled first: a handler that waits on something else than its
                    // inbox (a readiness wait) must not hold this reader.
                    previous.task.cancel()
                    await previous.inbox.finish(.failure(.remoteClosed("stream superseded")))
                    await previous.task.value
                    streaming = nil
                }
                let method = String(decoding: packet.data, as: UTF8.self)
                switch handlers[method] {
                case nil:
                    let reply = DRPCPacket(
                        streamID: packet.streamID, messageID: 1, kind: .error,
                        data: DRPCErrorBody.unknownRPC(method).encoded)
                    try? await transport.write(reply.encoded())
                    finishedStream = packet.streamID
                case .unary(let handler):
                    // In progress from its CloseSend (the handler runs): a client that sends an
                    // Invoke and then nothing holds no call, so its connection can be evicted.
                    unary = (packet.streamID, handler, nil)
                case .stream(let handler):
                    observer?.call(inProgress: true)
                    streaming = Self.start(handler, method: method, stream: packet.streamID, over: transport, observer: observer)
                }
            case .message:
                if let call = unary, call.stream == packet.streamID, call.request == nil {
                    unary?.request = packet.data
                } else if let call = streaming, call.stream == packet.streamID {
                    _ = await call.inbox.put(packet.data)
                } else {
                    await abort()
                    return .protocolError("message on stream \(packet.streamID), which has no call")
                }
            case .closeSend:
                if let call = unary, call.stream == packet.streamID {
                    unary = nil
                    finishedStream = call.stream
                    observer?.call(inProgress: true)
                    await Self.respond(to: call.stream, request: call.request, handler: call.handler, over: transport)
                    observer?.call(inProgress: false)
                } else if let call = streaming, call.stream == packet.streamID {
                    await call.inbox.finish(.success(()))
                }
            case .close, .cancel, .error:
                if unary?.stream == packet.streamID {
                    finishedStream = packet.streamID
                    unary = nil
                } else if let call = streaming, call.stream == packet.streamID {
                    finishedStream = packet.streamID
                    let reason: DRPCCallError =
                        packet.kind == .error
                        ? .remote(DRPCErrorBody(decoding: packet.data))
                        : .remoteClosed(packet.kind == .cancel ? "context canceled" : "remote closed the stream")
                    call.task.cancel()
                    await call.inbox.finish(.failure(reason))
                    await call.task.value
                    streaming = nil
                }
            }
        }
    }

    private static func start(
        _ handler: @escaping StreamHandler, method: String, stream: UInt64, over transport: some DRPCTransport,
        observer: (any DRPCServingObserver)?
    ) -> StreamingCall {
        let inbox = DRPCInbox()
        let sender = DRPCStreamSender(transport: transport, streamID: stream, firstMessageID: 1)
        let call = DRPCServerCall(method: method, inbox: inbox, sender: sender)
        let task = Task {
            do {
                try await handler(call)
                try? await sender.closeSend()
            } catch let body as DRPCErrorBody {
                try? await sender.sendError(body)
            } catch {
                try? await sender.sendError(DRPCErrorBody(code: 0, message: "\(error)"))
            }
            await inbox.handlerReturned()
            observer?.call(inProgress: false)
        }
        return StreamingCall(stream: stream, inbox: inbox, sender: sender, task: task)
    }

    nonisolated(nonsending) private static func respond(
        to stream: UInt64, request: [UInt8]?, handler: UnaryHandler, over transport: some DRPCTransport
    ) async {
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
