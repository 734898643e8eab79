import AgentCore
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization

/// Holds `GET /api/v2/workspaceagents/me/reinit?wait=true` beside the agent, as the reference's
/// `WaitForReinitLoop`: each `data` event is handed to `onEvent`; a failed or ended stream is
/// tried again after a back-off of 100 ms doubling to 10 s (reset after each event); 409 stops
/// for good, as does `onEvent` answering false.
public struct ReinitWatcher: Service, CustomStringConvertible {
    public var description: String { "ReinitWatcher(\(rest))" }

    public static let path = "/api/v2/workspaceagents/me/reinit"
    /// The reference's retry schedule (100 ms to 10 s), with some jitter.
    public static let backoff = Backoff(initial: .milliseconds(100), maximum: .seconds(10), factor: 2, jitter: .spread(0.1))

    /// A stream silent this long (coderd pings every 15 s) is given up and opened again.
    public static let defaultIdleTimeout: Duration = .seconds(60)

    private let rest: CoderRESTClient
    private let tokens: any SessionTokenSource
    private let logger: Logger
    private let idleTimeout: Duration
    private let onEvent: @Sendable (ReinitEvent) async -> Bool

    /// - Parameters:
    ///   - rest: coderd with the agent's headers (its token is replaced by `tokens`' on each attempt).
    ///   - tokens: the session token (the connection's latest, ``LatestSessionToken``).
    ///   - onEvent: false stops polling.
    public init(
        rest: CoderRESTClient, tokens: any SessionTokenSource, logger: Logger, idleTimeout: Duration = defaultIdleTimeout,
        onEvent: @escaping @Sendable (ReinitEvent) async -> Bool
    ) {
        self.rest = rest
        self.tokens = tokens
        self.logger = logger
        self.idleTimeout = idleTimeout
        self.onEvent = onEvent
    }

    public func run() async throws {
        // Cancelled at graceful shutdown: the open request ends with it.
        await cancelWhenGracefulShutdown {
            await self.poll()
        }
    }

    /// The loop; returns at 409, when `onEvent` says stop, or when cancelled.
    func poll() async {
        var backoff = Self.backoff
        while !Task.isCancelled {
            let wait = backoff.next()
            if wait > .zero {
                do { try await Task.sleep(for: wait) } catch { return }
            }
            logger.debug("waiting for agent reinitialization instructions")
            do {
                guard let event = try await waitOnce() else {
                    logger.info("received terminal 409, stopping reinit polling")
                    return
                }
                backoff.reset()
                logger.info(
                    "agent received instruction to reinitialize",
                    metadata: ["workspace_id": "\(event.workspaceID)", "reason": "\(event.reason)"])
                guard await onEvent(event) else { return }
            } catch {
                if Task.isCancelled { return }
                logger.error("failed to wait for agent reinitialization instructions", metadata: ["error": "\(error)"])
            }
        }
    }

    /// One request: the first `data` event, or nil for 409; throws for anything else.
    func waitOnce() async throws -> ReinitEvent? {
        let client = rest.with(token: try await tokens.sessionToken())
        let idleTimeout = idleTimeout
        let logger = logger
        return try await client.stream(Self.path, query: [("wait", "true")]) { status, body in
            // The idle bound covers an error answer's body too: one that stalls had stopped
            // the polling for good (the request's own deadline ends at the head).
            let activity = StreamActivity()
            return try await withThrowingTaskGroup(of: ReinitEvent?.self) { group in
                group.addTask {
                    if status != 200 {
                        // The error body, bounded as any answer.
                        var bytes: [UInt8] = []
                        for try await chunk in body {
                            activity.touch()
                            bytes += chunk.readableBytesView.prefix(CoderRESTClient.maxResponseBytes - bytes.count)
                            if bytes.count >= CoderRESTClient.maxResponseBytes { break }
                        }
                        let response = CoderRESTResponse(
                            method: "GET", url: client.url(Self.path, query: [("wait", "true")]), status: status, body: bytes)
                        if status == 409 {
                            logger.debug("reinit polling ended by the control plane", metadata: ["error": "\(response.unexpectedStatusText)"])
                            return nil
                        }
                        throw ReinitStreamParser.Failure(description: response.unexpectedStatusText)
                    }
                    var parser = ReinitStreamParser()
                    for try await chunk in body {
                        activity.touch()
                        for item in try parser.feed(chunk.readableBytesView) {
                            if case .event(let event) = item { return event }
                        }
                    }
                    throw ReinitStreamParser.Failure(description: "listening for reinitialization events: failed to read server-sent event: EOF")
                }
                group.addTask {
                    // Wakes a few times per timeout; the stream ends when nothing came for the whole of it.
                    while true {
                        try await Task.sleep(for: idleTimeout / 4)
                        if activity.silence >= idleTimeout {
                            throw ReinitStreamParser.Failure(description: "listening for reinitialization events: nothing for \(idleTimeout)")
                        }
                    }
                }
                defer { group.cancelAll() }
                return try await group.next() ?? nil
            }
        }
    }
}

/// When the stream last brought bytes.
private final class StreamActivity: Sendable {
    private let last = Mutex(ContinuousClock.now)

    func touch() { last.withLock { $0 = .now } }

    var silence: Duration { .now - last.withLock { $0 } }
}
