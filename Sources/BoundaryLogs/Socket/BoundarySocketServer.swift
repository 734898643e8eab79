import AgentCore
import CoreMetrics
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The unix socket boundary sends audit-log batches to: any number
/// of clients (at most ``Configuration/maxConnections`` at once; a new one closes the
/// longest-idle, see ``LocalConnectionRegistry``), one decoder per connection, all
/// feeding one forwarder. Beyond the reference: the socket is made by AgentCore's
/// ``SocketFile`` (its mode, 0600 unless configured, is set before it appears at the path),
/// a file at the path is replaced only if it is a socket nobody answers on, and at shutdown
/// the socket is removed only if it is still the one the agent made.
final class BoundarySocketServer: Service, Sendable {
    struct Configuration: Sendable {
        var path: String
        var mode: mode_t = 0o600
        /// Open connections; a new one beyond this closes the longest-idle.
        var maxConnections = 64
        /// A connection silent this long is closed (boundary dials again when it has logs).
        var idleTimeout: TimeAmount = .minutes(5)
        /// A frame (at most 4 + 32 768 bytes) must end within this of its first byte.
        var partialFrameTimeout: Duration = .seconds(10)
    }

    let configuration: Configuration
    private let forwarder: BoundaryForwarder
    private let logger = Logger(label: "workspace-agent.boundary")
    let registry: LocalConnectionRegistry
    private let listening = Mutex(false)

    init(configuration: Configuration, forwarder: BoundaryForwarder) {
        self.configuration = configuration
        self.forwarder = forwarder
        // A new producer always gets in: beyond the cap it closes the longest-idle connection,
        // or when every one is mid-frame the one whose frame began first (a real producer's
        // frame of at most 32 KiB arrives in one go, so that one is most likely stuck).
        self.registry = LocalConnectionRegistry(
            maxConnections: configuration.maxConnections, whenAllBusy: .closeLongestBusy,
            onCount: { BoundaryMetrics.connections.record($0) })
    }

    var isListening: Bool { listening.withLock { $0 } }

    func run() async throws {
        let file = SocketFile(path: configuration.path, mode: configuration.mode, stalePolicy: .socketOnly)
        let channel: any Channel
        let identity: SocketFile.Identity
        do {
            (channel, identity) = try await file.create(bind: bind) { try? await $0.close() }
        } catch {
            logger.warning("boundary log proxy not started", metadata: ["path": "\(configuration.path)", "error": "\(error)"])
            return
        }
        listening.withLock { $0 = true }
        logger.info("boundary log proxy listening", metadata: ["path": "\(configuration.path)"])
        await withShutdownHandler {
            try? await channel.closeFuture.get()
        } onShutdown: {
            channel.close(promise: nil)
        }
        registry.closeAll()
        listening.withLock { $0 = false }
        // Only the socket this agent made: another may have replaced it since.
        file.remove(ifStill: identity)
    }

    private func bind(_ path: String) async throws -> any Channel {
        let forwarder = self.forwarder
        let logger = self.logger
        let registry = self.registry
        let idle = configuration.idleTimeout
        let partialFrameTimeout = TimeAmount(configuration.partialFrameTimeout)
        // Any process of the user can connect at will: these lines are budgeted.
        let evictionLog = LogBudget()
        let partialFrameLog = LogBudget()
        return try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 64)
            .childChannelInitializer { channel in
                guard let (id, evicted) = registry.admit(close: { channel.close(promise: nil) }) else { return channel.close() }
                if evicted {
                    BoundaryMetrics.disconnected("evicted").increment()
                    evictionLog.log { leftOut in
                        logger.warning(
                            "too many boundary connections; closed the longest-idle one",
                            metadata: ["max": "\(registry.maxConnections)", "left_out": "\(leftOut)"])
                    }
                }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandlers([
                        IdleStateHandler(readTimeout: idle),
                        ByteToMessageHandler(BoundaryFrameDecoder()),
                        BoundaryConnectionWatch(
                            id: id, registry: registry, partialFrameTimeout: partialFrameTimeout,
                            onPartialFrame: {
                                BoundaryMetrics.disconnected("partial_frame").increment()
                                partialFrameLog.log { leftOut in
                                    logger.warning(
                                        "a boundary connection sent part of a frame and then nothing; closed",
                                        metadata: ["after": "\(partialFrameTimeout)", "left_out": "\(leftOut)"])
                                }
                            }),
                        BoundaryConnectionHandler(forwarder: forwarder, logger: logger),
                    ])
                }
            }
            .bind(unixDomainSocketPath: path)
            .get()
    }
}
