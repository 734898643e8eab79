import AgentCore
import Foundation
import Synchronization

/// coderd's `GET /api/v2/workspaceagents/me/reinit` on the double: server-sent events with a
/// ping when a stream opens, `data` events the test sends, the claim replayed to each new
/// stream (as coderd replays a claim whose build is still the latest), or 409 once told so.
public final class ReinitDouble: Sendable {
    private struct State {
        var streams: [UUID: AsyncStream<[UInt8]>.Continuation] = [:]
        /// Sent to every new stream (the claim coderd replays).
        var replay: [UInt8]?
        /// When set, every request is answered 409 with this message.
        var conflict: String?
        var requests = 0
    }
    private let state = Mutex(State())
    private let double: ControlPlaneDouble

    init(double: ControlPlaneDouble) {
        self.double = double
    }

    /// Requests answered so far (streams and refusals).
    public var requests: Int { state.withLock { $0.requests } }
    /// Streams open now.
    public var openStreams: Int { state.withLock { $0.streams.count } }

    /// Sends a claim to the open streams; `replayed` also sends it to each later one.
    public func claim(workspaceID: String, ownerID: String?, reason: String = "prebuild_claimed", replayed: Bool = true) {
        var object = #"{"workspace_id":\#(jsonQuote(workspaceID)),"reason":\#(jsonQuote(reason))"#
        if let ownerID { object += #","owner_id":\#(jsonQuote(ownerID))"# }
        object += "}"
        let event = Array("event: data\ndata: \(object)\n\n".utf8)
        let streams = state.withLock { s in
            if replayed { s.replay = event }
            return Array(s.streams.values)
        }
        for stream in streams { stream.yield(event) }
    }

    /// Sends coderd's keep-alive to the open streams.
    public func ping() {
        for stream in state.withLock({ Array($0.streams.values) }) { stream.yield(Array("event: ping\n\n".utf8)) }
    }

    /// Answers 409 from now on (coderd's `Workspace is not a prebuilt workspace waiting to be
    /// claimed.`), and ends the open streams.
    public func refuse(_ message: String = "Workspace is not a prebuilt workspace waiting to be claimed.") {
        let streams = state.withLock { s in
            s.conflict = message
            defer { s.streams.removeAll() }
            return Array(s.streams.values)
        }
        for stream in streams { stream.finish() }
    }

    func answer(_ request: DoubleHTTPRequest) -> DoubleHTTPResponse {
        if let refusal = double.agentAuthorization(request) {
            state.withLock { $0.requests += 1 }
            return refusal
        }
        let id = UUID()
        let (stream, continuation) = AsyncStream<[UInt8]>.makeStream(bufferingPolicy: .bufferingNewest(64))
        let conflict = state.withLock { s -> String? in
            s.requests += 1
            guard s.conflict == nil else { return s.conflict }
            s.streams[id] = continuation
            continuation.yield(Array("event: ping\n\n".utf8))
            if let replay = s.replay { continuation.yield(replay) }
            return nil
        }
        if let conflict { return .error(409, conflict) }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.streams.removeValue(forKey: id) }
        }
        return DoubleHTTPResponse(
            status: 200,
            headers: [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"), ("X-Accel-Buffering", "no")],
            body: .stream(stream))
    }
}

extension ControlPlaneDouble {
    /// Serves `/reinit` from now on; drive it through the answer.
    public func serveReinit() -> ReinitDouble {
        let reinit = ReinitDouble(double: self)
        handleHTTP("GET", "/api/v2/workspaceagents/me/reinit") { reinit.answer($0) }
        return reinit
    }
}
