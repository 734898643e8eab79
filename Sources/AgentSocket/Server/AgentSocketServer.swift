import AgentCore
import CoreMetrics
import DRPC
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The agent socket: dRPC on a unix socket, as a service.
///
/// `run()` makes the socket (0600 from the start, see ``SocketFile``), serves connections
/// concurrently until graceful shutdown, then closes them and removes the socket if it is
/// still the one it made. A failure to make the socket is logged and not fatal, as in the
/// reference. Beyond the reference, a client of another user (root excepted) is refused.
public final class AgentSocketServer: Service, Sendable {
    public struct Configuration: Sendable {
        public var path: String
        /// Open connections; a new one beyond this closes the quietest.
        public var maxConnections = 64
        /// A frame begun and not finished within this closes the connection.
        public var partialFrameTimeout: Duration = .seconds(10)
        /// An answer the client does not make room for within this closes the connection.
        public var writeTimeout: Duration = ChannelTransport.defaultWriteTimeout
        /// The uid clients must have (root is always let in); the agent's own by default.
        public var allowedUID: uid_t = geteuid()

        public init(path: String) {
            self.path = path
        }
    }

    public let configuration: Configuration
    private let server: DRPCServer
    private let logger: Logger
    private let registry: LocalConnectionRegistry
    private let listening = Mutex<Bool>(false)
    private let failure = Mutex<String?>(nil)
    /// Lines any process of the user can cause at will (evictions, refusals, broken
    /// protocol): budgeted, each kind its own.
    private let admissionLog = LogBudget()
    private let protocolLog = LogBudget()
    private let partialFrameLog = LogBudget()

    public init(configuration: Configuration, service: AgentSocketService, logger: Logger) {
        self.configuration = configuration
        self.server = service.makeServer()
        self.logger = logger
        // Beyond the cap a newcomer closes the quietest idle connection; a client waiting in a
        // call (`start` waiting for its dependencies) is never closed to make room, so when
        // every connection is in a call the newcomer is refused. Each connection holds at
        // most one dRPC packet being assembled (4 MiB): all together at most
        // maxConnections x 4 MiB.
        self.registry = LocalConnectionRegistry(
            maxConnections: configuration.maxConnections, whenAllBusy: .refuse,
            onCount: { SocketMetrics.connections.record($0) })
    }

    /// True once the socket is in place and accepting.
    public var isListening: Bool { listening.withLock { $0 } }

    /// Why the socket could not be made (`create socket: ...`), if it could not.
    public var creationFailure: String? { failure.withLock { $0 } }

    /// The creation failure in words; when another live agent holds the path, which one and
    /// how to choose another path (this agent then runs without its socket).
    static func explain(_ error: SocketFile.Failure, path: String) -> String {
        guard SocketFile.isLive(path) else { return "\(error)" }
        let holder = PeerProcess.listening(at: path).map { " (pid \($0))" } ?? ""
        return "\(error): another agent\(holder) is listening on it; this agent runs without its socket."
            + " Give each agent its own path with --socket-path or CODER_AGENT_SOCKET_PATH (and the same to exp sync and exp chat)"
    }

    public func run() async throws {
        let file = SocketFile(path: configuration.path)
        let serverChannel: NIOAsyncChannel<Accepted, Never>
        let identity: SocketFile.Identity
        do {
            (serverChannel, identity) = try await file.create(bind: bind) { try? await $0.channel.close() }
        } catch {
            let text = Self.explain(error, path: configuration.path)
            failure.withLock { $0 = text }
            logger.error("failed to create socket server", metadata: ["path": "\(configuration.path)", "error": "\(text)"])
            try? await gracefulShutdown()
            return
        }
        listening.withLock { $0 = true }
        logger.info("agent socket listening", metadata: ["path": "\(configuration.path)"])
        await withShutdownHandler {
            await withDiscardingTaskGroup { group in
                try? await serverChannel.executeThenClose { inbound in
                    for try await connection in inbound {
                        group.addTask { await self.serve(connection) }
                    }
                }
            }
        } onShutdown: {
            serverChannel.channel.close(promise: nil)
            self.registry.closeAll()
        }
        listening.withLock { $0 = false }
        if file.remove(ifStill: identity) {
            logger.debug("agent socket removed", metadata: ["path": "\(configuration.path)"])
        } else {
            logger.info("agent socket path now belongs to someone else; left in place", metadata: ["path": "\(configuration.path)"])
        }
    }

    /// A connection the registry admitted, and its id there.
    private struct Accepted: Sendable {
        var connection: NIOAsyncChannel<ByteBuffer, ByteBuffer>
        var id: UInt64
    }

    private func bind(_ path: String) async throws -> NIOAsyncChannel<Accepted, Never> {
        let registry = registry
        let logger = logger
        let admissionLog = admissionLog
        return try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 128)
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .bind(unixDomainSocketPath: path) { channel in
                channel.eventLoop.makeCompletedFuture {
                    guard let (id, evicted) = registry.admit(close: { channel.close(promise: nil) }) else {
                        // Shutting down, or every connection is in a call.
                        if !registry.isClosed {
                            SocketMetrics.disconnected("refused").increment()
                            admissionLog.log { leftOut in
                                logger.warning(
                                    "agent socket: refused a connection: every connection is in a call",
                                    metadata: ["limit": "\(registry.maxConnections)", "left_out": "\(leftOut)"])
                            }
                        }
                        channel.close(promise: nil)
                        throw ChannelError.ioOnClosedChannel
                    }
                    if evicted {
                        SocketMetrics.disconnected("evicted").increment()
                        admissionLog.log { leftOut in
                            logger.info(
                                "agent socket: too many connections; closed the quietest",
                                metadata: ["limit": "\(registry.maxConnections)", "left_out": "\(leftOut)"])
                        }
                    }
                    try channel.pipeline.syncOperations.addHandler(ConnectionActivity(id: id, registry: registry))
                    let connection = try NIOAsyncChannel<ByteBuffer, ByteBuffer>(
                        wrappingChannelSynchronously: channel, configuration: .init(isOutboundHalfClosureEnabled: true))
                    return Accepted(connection: connection, id: id)
                }
            }
    }

    /// One connection: the peer's user is checked, then calls are served one at a time
    /// until EOF or a protocol error (logged, then the connection is closed). The dRPC
    /// decoder tells the connection's ``ConnectionWatch`` when a call runs and whether a
    /// frame is half received.
    private func serve(_ accepted: Accepted) async {
        let connection = accepted.connection
        if let peer = await PeerCredentials.of(connection.channel), peer.uid != configuration.allowedUID, peer.uid != 0 {
            logger.warning(
                "agent socket: refused a client of another user",
                metadata: ["peer_uid": "\(peer.uid)", "peer_pid": "\(peer.pid)", "agent_uid": "\(configuration.allowedUID)"])
            SocketMetrics.disconnected("peer_refused").increment()
            try? await connection.channel.close()
            return
        }
        let channel = connection.channel
        let server = server
        let watch = ConnectionWatch(
            id: accepted.id, registry: registry, channel: channel, partialFrameTimeout: TimeAmount(configuration.partialFrameTimeout),
            logger: logger, partialFrameLog: partialFrameLog)
        defer { watch.stop() }
        // Serving ends when the connection closes (the peer, or closeAll at shutdown), even
        // if a handler is busy: closing cancels the serving task.
        let served = try? await ChannelTransport.using(connection, writeTimeout: configuration.writeTimeout) { transport in
            await withTaskGroup(of: DRPCServer.End?.self) { group -> DRPCServer.End in
                group.addTask { await server.serve(transport, observer: watch) }
                group.addTask {
                    try? await channel.closeFuture.get()
                    return nil
                }
                var end: DRPCServer.End = .endOfStream
                if let first = await group.next(), let served = first { end = served }
                group.cancelAll()
                channel.close(promise: nil)
                for await result in group { if let served = result { end = served } }
                return end
            }
        }
        if case .protocolError(let reason)? = served {
            SocketMetrics.disconnected("protocol_error").increment()
            protocolLog.log { leftOut in
                logger.warning("agent socket: client broke the protocol; disconnected", metadata: ["error": "\(reason)", "left_out": "\(leftOut)"])
            }
        }
        try? await connection.channel.close()
    }

    /// Open connections now.
    public var connectionCount: Int { registry.count }

    /// Connections with a call in progress now (a `start` waiting counts).
    public var busyConnectionCount: Int { registry.busyCount }
}

/// Who is at the other end of a unix socket (SO_PEERCRED).
struct PeerCredentials: Sendable {
    var pid: pid_t
    var uid: uid_t

    /// Linux's `struct ucred` (pid, uid, gid: three 32-bit fields, no padding); glibc
    /// declares it only under _GNU_SOURCE, so Swift does not see it.
    private struct UCred: Sendable {
        var pid: Int32 = 0
        var uid: UInt32 = 0
        var gid: UInt32 = 0
    }

    static func of(_ channel: any Channel) async -> PeerCredentials? {
        guard let provider = channel as? any SocketOptionProvider else { return nil }
        let credentials: UCred? = try? await provider.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED)
        ).get()
        return credentials.map { PeerCredentials(pid: $0.pid, uid: $0.uid) }
    }
}
