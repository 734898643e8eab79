import AgentCore
import DRPC
import NIOCore
import Yamux

/// One participant stream: a dRPC call on its own yamux stream, its receiving side
/// (``UpwardMessageSource``) and its sending side (``UpwardStreamSender``). Runs on the
/// session's event loop, as the session does, so a message costs no thread hop.
///
/// Receiving pulls from the yamux stream, which credits the window as bytes are taken: what
/// the participant has not read is at most the window (256 KiB, the control plane waits for
/// credit beyond it), plus the one message being assembled, at most the call's
/// `maxMessageBytes` (a larger one fails the stream). A receive or send waiting when its
/// task is cancelled resets the stream. Once both sides have ended the stream is closed
/// (FIN) and its participant forgets it.
actor ParticipantStream: UpwardMessageSource, UpwardStreamSender {
    nonisolated let stream: YamuxStream
    private let sender: DRPCStreamSender
    /// Taken out while a receive runs (one reader at a time).
    private var receiver: DRPCStreamReceiver<YamuxDRPCTransport>?
    /// How the receiving side ended: nil while open.
    private var received: Result<Void, UpwardStreamError>?
    private var sendEnded = false
    private let owner: ParticipantSession

    nonisolated var unownedExecutor: UnownedSerialExecutor {
        stream.session.eventLoop.executor.asUnownedSerialExecutor()
    }

    init(stream: YamuxStream, sender: DRPCStreamSender, receiver: DRPCStreamReceiver<YamuxDRPCTransport>, owner: ParticipantSession) {
        self.stream = stream
        self.sender = sender
        self.receiver = receiver
        self.owner = owner
    }

    func receive() async throws(UpwardStreamError) -> [UInt8]? {
        switch received {
        case .success: return nil
        case .failure(let error): throw error
        case nil: break
        }
        guard var current = receiver else { throw UpwardStreamError(.closed, "another receive is waiting on this stream") }
        receiver = nil
        let stream = stream
        let outcome: Result<[UInt8]?, UpwardStreamError>
        do {
            let message = try await withTaskCancellationHandler {
                try await current.receive()
            } onCancel: {
                stream.resetSoon()
            }
            outcome = .success(message)
        } catch {
            outcome = .failure(UpwardStreamError(error))
        }
        receiver = current
        switch outcome {
        case .success(let message?):
            return message
        case .success(nil):
            received = .success(())
            await finishIfDone()
            return nil
        case .failure(let error):
            received = .failure(error)
            // A failed receive ends the call both ways (a wire error or a cancellation has
            // already reset the stream; after the server's Error, FIN ends it).
            sendEnded = true
            await finishIfDone()
            throw error
        }
    }

    func send(_ message: [UInt8]) async throws(UpwardStreamError) {
        guard !sendEnded else { throw UpwardStreamError(.closed) }
        try await perform { (sender) async throws(DRPCCallError) in try await sender.send(message) }
    }

    func closeSend() async throws(UpwardStreamError) {
        guard !sendEnded else { return }
        try await perform { (sender) async throws(DRPCCallError) in try await sender.closeSend() }
        sendEnded = true
        await finishIfDone()
    }

    func cancel() async {
        sendEnded = true
        if received == nil { received = .failure(UpwardStreamError(.closed, "cancelled by the participant")) }
        await sender.cancel()
        owner.forget(stream)
    }

    /// Runs one sending step, resetting the stream if the task is cancelled while it waits
    /// (for window credit). A failed send ends the sending side.
    private func perform(_ step: (DRPCStreamSender) async throws(DRPCCallError) -> Void) async throws(UpwardStreamError) {
        let stream = stream
        let sender = sender
        do {
            try await withTaskCancellationHandler {
                try await step(sender)
            } onCancel: {
                stream.resetSoon()
            }
        } catch {
            sendEnded = true
            let failure = UpwardStreamError(error)
            await finishIfDone()
            throw failure
        }
    }

    /// Both sides ended: FIN (harmless after a reset) and the participant forgets the stream.
    private func finishIfDone() async {
        guard sendEnded, received != nil else { return }
        await stream.close()
        owner.forget(stream)
    }
}

extension YamuxStream {
    /// Resets the stream from any thread (a cancellation handler).
    func resetSoon() {
        let session = session
        let id = id
        session.eventLoop.execute { session.assumeIsolated { $0.resetStream(id) } }
    }
}
