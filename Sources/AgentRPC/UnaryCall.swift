import DRPC
import NIOCore
import Synchronization
import Yamux

extension YamuxSession {
    /// One unary dRPC call on a fresh stream.
    ///
    /// The call is started on the session's loop and its reply is parsed there as it
    /// arrives (push mode), resuming the caller straight from the read: one hop in, one
    /// hop out, as with a bare WebSocket message. A request larger than the stream's
    /// window falls back to waiting for credit. Cancelling the calling task resets the
    /// call's stream (the reference closes the call's transport) and throws.
    public nonisolated func unaryCall(
        _ method: String, request: [UInt8],
        maxMessageSize: Int = DRPCPacketAssembler.defaultMaxPacketSize
    ) async throws -> [UInt8] {
        let handle = CallHandle()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                eventLoop.execute {
                    self.assumeIsolated { session in
                        session.startUnary(method, request, maxMessageSize: maxMessageSize, handle, continuation)
                    }
                }
            }
        } onCancel: {
            guard let id = handle.cancel() else { return }
            eventLoop.execute { self.assumeIsolated { $0.resetStream(id) } }
        }
    }

    private func startUnary(
        _ method: String, _ request: [UInt8], maxMessageSize: Int, _ handle: CallHandle,
        _ continuation: CheckedContinuation<[UInt8], any Error>
    ) {
        let stream: YamuxStream
        do {
            stream = try open()
        } catch {
            continuation.resume(throwing: error)
            return
        }
        guard handle.started(stream.id) else {
            // Cancelled before it began: nothing was sent but the (lazy) SYN.
            resetStream(stream.id)
            continuation.resume(throwing: CancellationError())
            return
        }
        let call = UnaryReply(streamID: stream.id, maxMessageSize: maxMessageSize, continuation: continuation)
        setSink(stream.id) { call.handle($0, session: self) }
        let bytes = DRPCClient.unaryRequest(method, request)
        // A failure to write reaches the sink too (the stream or the session ended), which
        // answers the caller.
        do {
            if try tryWrite(stream.id, bytes) { return }
        } catch {
            resetStream(stream.id)
            return
        }
        // Larger than the window: wait for credit.
        Task { try? await stream.write(bytes) }
    }
}

/// The client side of one unary call in push mode: parses the reply as it arrives on the
/// session's loop and resumes the caller once. Confined to that loop.
private final class UnaryReply {
    private let streamID: UInt32
    private var reader: DRPCPacketReader
    private var continuation: CheckedContinuation<[UInt8], any Error>?

    init(streamID: UInt32, maxMessageSize: Int, continuation: CheckedContinuation<[UInt8], any Error>) {
        self.streamID = streamID
        self.reader = DRPCPacketReader(maxPacketSize: maxMessageSize)
        self.continuation = continuation
    }

    func handle(_ event: YamuxStreamEvent, session: isolated YamuxSession) {
        guard continuation != nil else { return }
        switch event {
        case .data(let bytes):
            reader.feed(bytes)
            do {
                while let packet = try reader.next() {
                    guard packet.streamID == 1 else { continue }
                    switch DRPCReply(packet) {
                    case .message(let data):
                        finish(.success(data), session: session)
                    case .end:
                        finish(.failure(DRPCCallError.unexpectedEOF), session: session)
                    case .failure(let error, let closeTransport):
                        finish(.failure(error), reset: closeTransport, session: session)
                    }
                    return  // the first packet of the call decides it
                }
            } catch {
                finish(.failure(DRPCCallError.wire(error)), reset: true, session: session)
            }
        case .end:
            finish(.failure(DRPCCallError.unexpectedEOF), session: session)
        case .failed(let error):
            finish(.failure(DRPCCallError.transport("\(error)")), session: session)
        }
    }

    /// Resumes the caller once and ends the stream: FIN (as the Go client closes after the
    /// reply), or RST after a wire error.
    func finish(_ result: Result<[UInt8], any Error>, reset: Bool = false, session: isolated YamuxSession) {
        guard let continuation else { return }
        self.continuation = nil
        if reset { session.resetStream(streamID) } else { session.closeStream(streamID) }
        continuation.resume(with: result)
    }
}

/// Links a unary call's cancellation (any thread) to its stream (known on the loop).
private final class CallHandle: Sendable {
    private let state = Mutex<(id: UInt32?, cancelled: Bool)>((nil, false))

    /// Records the stream; false when the call was already cancelled.
    func started(_ id: UInt32) -> Bool {
        state.withLock { s in
            s.id = id
            return !s.cancelled
        }
    }

    /// Marks the call cancelled; the stream to reset, if it exists yet.
    func cancel() -> UInt32? {
        state.withLock { s in
            s.cancelled = true
            return s.id
        }
    }
}
