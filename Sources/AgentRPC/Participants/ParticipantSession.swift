import AgentCore
import DRPC
import Synchronization
import Yamux

/// One participant's view of one connected session (AgentCore's ``UpwardSession``): opens
/// its calls on the session's yamux connection and keeps the streams it opened, so that
/// ending the participant ends whatever it left open.
///
/// Memory: at most ``UpwardStreamLimits/maxStreams`` streams tracked (an open beyond it
/// throws ``UpwardStreamError/Kind/tooManyStreams``); a stream leaves the list once both
/// its sides have ended. Each stream's own bound is the yamux window plus one message
/// (``ParticipantStream``).
final class ParticipantSession: UpwardSession, Sendable {
    let number: Int
    let apiVersion: AgentAPIVersion
    let yamux: YamuxSession
    let maxStreams: Int

    private struct State {
        var open: [UInt32: YamuxStream] = [:]
        /// Opens under way (counted against the bound before the stream exists).
        var opening = 0
        var ended = false
    }
    private let state = Mutex(State())

    init(number: Int, yamux: YamuxSession, apiVersion: AgentAPIVersion = .current, maxStreams: Int = UpwardStreamLimits.maxStreams) {
        self.number = number
        self.apiVersion = apiVersion
        self.yamux = yamux
        self.maxStreams = maxStreams
    }

    /// Streams open now.
    var openStreamCount: Int { state.withLock { $0.open.count } }

    func unary(_ rpc: String, request: [UInt8], maxMessageBytes: Int) async throws(UpwardStreamError) -> [UInt8] {
        guard !state.withLock({ $0.ended }) else { throw UpwardStreamError(.sessionEnded, "the participant has stopped") }
        do {
            // Its own stream, reset if the calling task is cancelled (`unaryCall`).
            return try await yamux.unaryCall(rpc, request: request, maxMessageSize: maxMessageBytes)
        } catch {
            throw UpwardStreamError(error)
        }
    }

    func serverStream(_ rpc: String, request: [UInt8], maxMessageBytes: Int) async throws(UpwardStreamError) -> UpwardMessages {
        let stream = try await open(rpc, maxMessageBytes: maxMessageBytes)
        // Invoke, the request and CloseSend: the server's handler reads its one request.
        try await stream.send(request)
        try await stream.closeSend()
        return UpwardMessages(stream)
    }

    func bidiStream(_ rpc: String, maxMessageBytes: Int) async throws(UpwardStreamError) -> UpwardBidiStream {
        let stream = try await open(rpc, maxMessageBytes: maxMessageBytes)
        return UpwardBidiStream(sender: stream, messages: UpwardMessages(stream))
    }

    /// Opens a yamux stream for one dRPC call (stream ID 1 on it, as every call of the agent).
    private func open(_ rpc: String, maxMessageBytes: Int) async throws(UpwardStreamError) -> ParticipantStream {
        try state.withLock { s throws(UpwardStreamError) in
            guard !s.ended else { throw UpwardStreamError(.sessionEnded, "the participant has stopped") }
            guard s.open.count + s.opening < maxStreams else { throw UpwardStreamError(.tooManyStreams(limit: maxStreams)) }
            s.opening += 1
        }
        let stream: YamuxStream
        do {
            stream = try await yamux.open()
        } catch {
            state.withLock { $0.opening -= 1 }
            throw UpwardStreamError(error)
        }
        let ended = state.withLock { s -> Bool in
            s.opening -= 1
            if !s.ended { s.open[stream.id] = stream }
            return s.ended
        }
        if ended {
            await stream.reset()
            throw UpwardStreamError(.sessionEnded, "the participant has stopped")
        }
        let (sender, receiver) = DRPCClient.stream(rpc, over: YamuxDRPCTransport(stream: stream), maxMessageSize: maxMessageBytes)
        return ParticipantStream(stream: stream, sender: sender, receiver: receiver, owner: self)
    }

    /// Both sides of `stream` ended: it is no longer the participant's to reset.
    func forget(_ stream: YamuxStream) {
        state.withLock { _ = $0.open.removeValue(forKey: stream.id) }
    }

    /// The participant has stopped: nothing more opens, and every stream it left open ends.
    /// - Parameter abort: reset them (RST: the participant was stopped; pending receives
    ///   and sends throw at once). Otherwise (it returned on its own) each is closed (FIN,
    ///   after what it queued: its last messages still arrive, then the control plane reads
    ///   the end).
    func end(abort: Bool) async {
        let left = state.withLock { s -> [YamuxStream] in
            s.ended = true
            defer { s.open.removeAll() }
            return Array(s.open.values)
        }
        for stream in left {
            if abort { await stream.reset() } else { await stream.close() }
        }
    }
}
