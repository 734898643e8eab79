import AgentCore
import AgentProto
import Logging
import SwiftProtobuf
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Runs the agent's side of one `Coordinate` stream: sends
/// `update_self` with the current node as soon as it is sendable (a home region is known, i.e.
/// DERP is up) and on every change, applies each response's peer updates through the shared
/// ``CoordinationState`` (kept across streams: peers survive a dropped stream, marked lost),
/// hands the changes to `apply`, and acks every NODE update with `ready_for_handshake`.
/// ``disconnect()`` sends `disconnect{}` and lets the stream end when the server closes it.
public final class CoordinationClient: Sendable {
    public typealias Apply = @Sendable ([CoordinationState.Change]) -> Void

    private let state: Mutex<CoordinationState>
    private let announcer: NodeAnnouncer
    private let apply: Apply
    private let sinceHandshake: @Sendable ([UInt8]) -> Duration?
    private let logger: Logger
    /// Requests waiting to be written on the current stream: acks and nodes are small and
    /// few; bounded all the same (a stalled stream is cut by the transport's own limits).
    static let outgoingLimit = 1024
    private let outgoing = Mutex<AsyncStream<Coder_Tailnet_V2_CoordinateRequest>.Continuation?>(nil)
    private let counters = Mutex(Counters())
    /// Fired when the current stream's `run` returns (one per stream).
    private let streamEnd = Mutex<OneShotSignal?>(nil)

    public struct Counters: Sendable, Equatable {
        public var streams = 0
        public var nodesSent = 0
        public var acksSent = 0
        public var refused = 0
        public var errors = 0
    }

    public var snapshot: Counters { counters.withLock { $0 } }

    /// `sinceHandshake`: how long ago a node key's last WireGuard handshake was (nil: never),
    /// for lost peers (``CoordinationState/lostTimeout``).
    public init(
        announcer: NodeAnnouncer, apply: @escaping Apply, sinceHandshake: @escaping @Sendable ([UInt8]) -> Duration? = { _ in nil },
        logger: Logger
    ) {
        self.state = Mutex(CoordinationState())
        self.announcer = announcer
        self.apply = apply
        self.sinceHandshake = sinceHandshake
        self.logger = logger
    }

    /// The peers as they stand (for the status route).
    public var peers: [[UInt8]: (node: PeerNode, lost: Bool)] { state.withLock { $0.peers } }

    /// Serves one stream until the server ends it or the task is cancelled. `send` writes one
    /// request (serialized); `responses` yields each response's bytes.
    public func run<Responses: AsyncSequence>(
        responses: Responses, send: @escaping @Sendable ([UInt8]) async throws -> Void
    ) async throws where Responses.Element == [UInt8] {
        let (requests, continuation) = AsyncStream.makeStream(
            of: Coder_Tailnet_V2_CoordinateRequest.self, bufferingPolicy: .bufferingOldest(Self.outgoingLimit))
        let ended = OneShotSignal()
        outgoing.withLock { $0 = continuation }
        streamEnd.withLock { $0 = ended }
        counters.withLock { $0.streams += 1 }
        defer {
            ended.fire()
            outgoing.withLock { $0 = nil }
            continuation.finish()
            state.withLock { $0.streamEnded(now: .now) }
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            // The writer: one task, so requests keep their order.
            group.addTask {
                for await request in requests {
                    try await send(try request.serializedBytes())
                    self.counters.withLock { c in
                        if request.hasUpdateSelf { c.nodesSent += 1 }
                        if !request.readyForHandshake.isEmpty { c.acksSent += 1 }
                    }
                }
            }
            // The node feed: the current node, then every change.
            group.addTask { [announcer] in
                for await node in announcer.updates() where node.isSendable {
                    continuation.yield(CoordinationState.updateSelf(node.message(asOf: Self.now())))
                }
            }
            // The reader: the stream ends when the server ends it.
            for try await bytes in responses {
                let response: Coder_Tailnet_V2_CoordinateResponse
                do {
                    response = try Coder_Tailnet_V2_CoordinateResponse(serializedBytes: bytes)
                } catch {
                    counters.withLock { $0.errors += 1 }
                    logger.warning("coordination response does not decode", metadata: ["error": "\(error)"])
                    continue
                }
                let outcome = state.withLock { $0.apply(response, now: .now, sinceHandshake: sinceHandshake) }
                if !outcome.changes.isEmpty { apply(outcome.changes) }
                if let ack = outcome.ack { continuation.yield(ack) }
                for refusal in outcome.refused {
                    logger.debug("peer node ignored", metadata: ["reason": "\(refusal.reason.rawValue)"])
                }
                if !outcome.refused.isEmpty || outcome.overflow > 0 {
                    counters.withLock { $0.refused += outcome.refused.count + outcome.overflow }
                }
                if let error = outcome.error {
                    counters.withLock { $0.errors += 1 }
                    if error.hasPrefix("ready for handshake error") {
                        logger.warning("coordinator", metadata: ["error": "\(error)"])
                    } else {
                        logger.error("coordinator", metadata: ["error": "\(error)"])
                    }
                }
            }
            group.cancelAll()
        }
    }

    /// Queues `disconnect{}` on the current stream (the graceful end: peers hear DISCONNECTED,
    /// not LOST); the server then closes the stream, which ends ``run(responses:send:)``.
    /// False when no stream is open.
    @discardableResult
    public func disconnect() -> Bool {
        guard let continuation = outgoing.withLock({ $0 }) else { return false }
        if case .enqueued = continuation.yield(CoordinationState.disconnect) { return true }
        return false
    }

    /// Waits until the current stream ends (the server closed it after `disconnect`), at most
    /// `limit`; returns at once when no stream is open.
    public func waitForStreamEnd(within limit: Duration) async {
        guard let ended = streamEnd.withLock({ $0 }), !ended.isFired else { return }
        await sleep(for: limit, orUntil: { await ended.wait() })
    }

    /// The wall clock for `as_of`.
    static func now() -> (seconds: Int64, nanos: Int32) {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return (Int64(spec.tv_sec), Int32(spec.tv_nsec))
    }
}
