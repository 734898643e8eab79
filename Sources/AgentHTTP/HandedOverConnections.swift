import AgentCore
import Logging
import NIOCore
import NIOPosix
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Connections another module hands over (AgentCore's ``ConnectionAcceptor``), served by an
/// ``AgentHTTPServing`` exactly as the connections its listener accepts: the same routes,
/// guards, deadlines and connection cap (they are admitted into the same registry, so the
/// agent's shutdown drains and closes them with the others), each request's context naming
/// the listener it came from.
///
/// A hand-over only queues the descriptor (it never blocks, from any thread); ``run(serving:)``
/// takes each one up on an event loop (NIO adopts the socket) and serves it until it
/// closes, as Hummingbird's `Server.run()` serves what it accepts.
///
/// Memory: at most ``maxWaiting`` descriptors wait to be taken up (more are refused with
/// ``ConnectionHandOverError/Reason/backlogFull``); one entry per connection being served,
/// which the registry's cap bounds (a connection beyond it is closed at once).
public final class HandedOverConnections: ConnectionAcceptor, Sendable {
    /// Default bound on descriptors handed over and not yet taken up.
    public static let defaultMaxWaiting = 256

    private struct Handed: Sendable {
        let descriptor: CInt
        let origin: ConnectionOrigin
    }

    private enum Phase {
        /// Not serving yet: hand-overs are refused.
        case idle
        case running
        /// Graceful shutdown reached the serving phase (or the task was cancelled).
        case stopped
    }

    private struct State {
        var phase = Phase.idle
        var waiting: [Handed] = []
        var open: [ObjectIdentifier: any Channel] = [:]
    }

    /// Most descriptors waiting to be taken up.
    public let maxWaiting: Int
    private let state = Mutex(State())
    private let arrived = WorkSignal()
    private let group: any EventLoopGroup
    private let logger: Logger

    /// Hand-overs are refused until ``run(serving:)`` runs.
    /// - Parameters:
    ///   - maxWaiting: descriptors that may wait to be taken up.
    ///   - eventLoopGroup: where adopted connections run.
    public init(
        maxWaiting: Int = defaultMaxWaiting, eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger
    ) {
        self.maxWaiting = maxWaiting
        self.group = eventLoopGroup
        self.logger = logger
    }

    /// Queues `descriptor` for ``run(serving:)`` (AgentCore's ``ConnectionAcceptor``): checks
    /// the name and the socket, never blocks; refused ones are closed and counted.
    public func serve(descriptor: CInt, listener: String, remote: String?) throws(ConnectionHandOverError) {
        var refusal: ConnectionHandOverError?
        if !ListenerName.isValid(listener) {
            refusal = ConnectionHandOverError(.invalidListenerName)
        } else if let code = Self.prepareStreamSocket(descriptor) {
            refusal = ConnectionHandOverError(.notAStreamSocket(errno: code))
        } else {
            let handed = Handed(descriptor: descriptor, origin: ConnectionOrigin(listener: listener, remote: ListenerName.boundedRemote(remote)))
            refusal = state.withLock { s -> ConnectionHandOverError? in
                guard case .running = s.phase else { return ConnectionHandOverError(.notServing) }
                guard s.waiting.count < maxWaiting else { return ConnectionHandOverError(.backlogFull) }
                s.waiting.append(handed)
                return nil
            }
        }
        if let refusal {
            close(descriptor)
            HTTPMetrics.handOverRefused(refusal.reason)
            throw refusal
        }
        arrived.notify()
    }

    /// Connections being served now.
    public var openCount: Int { state.withLock { $0.open.count } }

    /// Serves what is handed over with `serving` until graceful shutdown or cancellation;
    /// returns once every connection it took up has closed.
    ///
    /// At graceful shutdown (the host runs this in the `serving` phase, beside the listener)
    /// new hand-overs are refused, the ones waiting are still taken up (the registry, draining
    /// since `announce`, answers them 503), and open connections are asked to finish their
    /// exchange and close, as the listener's are; the registry closes what is left at the
    /// shutdown bound. Cancellation closes them at once.
    public func run(serving: AgentHTTPServing) async {
        state.withLock { s in
            if case .idle = s.phase { s.phase = .running }
        }
        await withShutdownHandler {
            await withDiscardingTaskGroup { tasks in
                // One turn per wake-up; ends once stopped and nothing waits.
                while true {
                    let (batch, stopped) = state.withLock { s -> ([Handed], Bool) in
                        defer { s.waiting.removeAll() }
                        if case .stopped = s.phase { return (s.waiting, true) }
                        return (s.waiting, false)
                    }
                    for handed in batch { tasks.addTask { await self.take(handed, serving: serving) } }
                    if stopped || Task.isCancelled { break }
                    await arrived.wait()
                }
            }
        } onShutdown: { [self] in
            let open = state.withLock { s -> [any Channel] in
                s.phase = .stopped
                return Array(s.open.values)
            }
            // As Hummingbird's server quiesces the connections it accepted: an idle one
            // closes, a busy one closes after its exchange.
            for channel in open { channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent()) }
            arrived.notify()
        }
        // What arrived while stopping (a cancelled run takes nothing up).
        let left = state.withLock { s -> [Handed] in
            defer { s.waiting.removeAll() }
            return s.waiting
        }
        for handed in left { close(handed.descriptor) }
    }

    /// Adopts one descriptor and serves it until it closes.
    private func take(_ handed: Handed, serving: AgentHTTPServing) async {
        guard !Task.isCancelled else {
            close(handed.descriptor)
            return
        }
        let child = serving.childChannel.from(handed.origin)
        let value: AgentHTTPChannel.Value
        // Counted as open before the pipeline exists: plain HTTP is answered inside the
        // pipeline, so a request can be served before `withConnectedSocket` returns.
        let adopted = Mutex<ObjectIdentifier?>(nil)
        do {
            // From here NIO owns the descriptor (it closes it if the set-up fails).
            value = try await ClientBootstrap(group: group)
                .channelOption(.allowRemoteHalfClosure, value: true)
                .withConnectedSocket(handed.descriptor) { [self] channel in
                    let id = ObjectIdentifier(channel)
                    adopted.withLock { $0 = id }
                    state.withLock { $0.open[id] = channel }
                    return child.setup(channel: channel, logger: serving.logger)
                }
        } catch {
            if let id = adopted.withLock({ $0 }) { state.withLock { _ = $0.open.removeValue(forKey: id) } }
            logger.info("could not serve a handed-over connection", metadata: [
                "listener": "\(handed.origin.listener)", "error": "\(error)",
            ])
            return
        }
        HTTPMetrics.handedOver(handed.origin.listener)
        logger.debug("serving a handed-over connection", metadata: [
            "listener": "\(handed.origin.listener)", "remote": "\(handed.origin.remote ?? "")",
        ])
        let channel = value.channel
        let id = ObjectIdentifier(channel)
        await withTaskCancellationHandler {
            await child.handle(value: value, logger: serving.logger)
        } onCancel: {
            channel.close(promise: nil)
        }
        state.withLock { _ = $0.open.removeValue(forKey: id) }
    }

    /// Checks that `descriptor` is a stream socket and makes it non-blocking (what NIO will
    /// need); nil when it is fit, else the errno of the check that failed (ENOTSOCK: not a
    /// socket, EBADF: not open; 0: a socket of another type).
    static func prepareStreamSocket(_ descriptor: CInt) -> Int32? {
        var type: CInt = 0
        var length = socklen_t(MemoryLayout<CInt>.size)
        guard getsockopt(descriptor, SOL_SOCKET, SO_TYPE, &type, &length) == 0 else { return errno }
        guard type == CInt(SOCK_STREAM.rawValue) else { return 0 }
        let flags = fcntl(descriptor, F_GETFL)
        guard flags >= 0, fcntl(descriptor, F_SETFL, flags | O_NONBLOCK) == 0 else { return errno }
        return nil
    }
}
