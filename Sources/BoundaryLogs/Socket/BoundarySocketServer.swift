import AgentCore
import CoreMetrics
import FoundationEssentials
import Glibc
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization

/// The unix socket boundary sends audit-log batches to (spec boundary-logs §1): any number
/// of clients (at most ``Configuration/maxConnections`` at once), one decoder per
/// connection, all feeding one forwarder. Beyond the reference: the socket's mode is set
/// explicitly (0600 unless configured), a file at the path is replaced only if it is a
/// socket nobody answers on, and at shutdown the socket is removed only if it is still the
/// one the agent made.
final class BoundarySocketServer: Service, Sendable {
    struct Configuration: Sendable {
        var path: String
        var mode: mode_t = 0o600
        var maxConnections = 64
        /// A connection silent this long is closed (boundary dials again when it has logs).
        var idleTimeout: TimeAmount = .minutes(5)
    }

    let configuration: Configuration
    private let forwarder: BoundaryForwarder
    private let logger = Logger(label: "workspace-agent.boundary")
    /// Connections open now (shared with the channel initializer).
    private final class Count: Sendable {
        let value = Mutex(0)
    }
    private let open = Count()
    private let listening = Mutex(false)

    init(configuration: Configuration, forwarder: BoundaryForwarder) {
        self.configuration = configuration
        self.forwarder = forwarder
    }

    var isListening: Bool { listening.withLock { $0 } }

    func run() async throws {
        let path = configuration.path
        guard prepare(path) else { return }
        let forwarder = self.forwarder
        let logger = self.logger
        let limit = configuration.maxConnections
        let idle = configuration.idleTimeout
        let open = self.open
        let channel: any Channel
        do {
            channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .serverChannelOption(.backlog, value: 64)
                .childChannelInitializer { channel in
                    let admitted = open.value.withLock { count -> Bool in
                        guard count < limit else { return false }
                        count += 1
                        return true
                    }
                    guard admitted else {
                        logger.warning("too many boundary connections; refusing one", metadata: ["max": "\(limit)"])
                        return channel.close()
                    }
                    BoundaryMetrics.connections.record(open.value.withLock { $0 })
                    channel.closeFuture.whenComplete { _ in
                        BoundaryMetrics.connections.record(open.value.withLock { count in
                            count -= 1
                            return count
                        })
                    }
                    return channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandlers([
                            IdleStateHandler(readTimeout: idle),
                            ByteToMessageHandler(BoundaryFrameDecoder()),
                            BoundaryConnectionHandler(forwarder: forwarder, logger: logger),
                        ])
                    }
                }
                .bind(unixDomainSocketPath: path)
                .get()
        } catch {
            logger.warning("boundary log proxy not started", metadata: ["path": "\(path)", "error": "\(error)"])
            return
        }
        chmod(path, configuration.mode)
        let identity = Self.identity(path)
        listening.withLock { $0 = true }
        logger.info("boundary log proxy listening", metadata: ["path": "\(path)"])
        await withShutdownHandler {
            try? await channel.closeFuture.get()
        } onShutdown: {
            channel.close(promise: nil)
        }
        listening.withLock { $0 = false }
        // Only the socket this agent made: another may have replaced it since.
        if let identity, Self.identity(path) == identity { unlink(path) }
    }

    /// Clears the way for the socket: a stale socket file is removed; a live one (another
    /// agent answers) or anything that is not a socket stops the proxy, with a warning.
    private func prepare(_ path: String) -> Bool {
        var info = stat()
        guard lstat(path, &info) == 0 else { return true }
        guard (info.st_mode & S_IFMT) == S_IFSOCK else {
            logger.warning("boundary log proxy not started: the path is not a socket", metadata: ["path": "\(path)"])
            return false
        }
        if let fd = try? UnixSocket.connect(path).get() {
            close(fd)
            logger.warning("boundary log proxy not started: another process serves the socket", metadata: ["path": "\(path)"])
            return false
        }
        unlink(path)
        return true
    }

    private static func identity(_ path: String) -> [UInt64]? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        return [UInt64(info.st_dev), UInt64(info.st_ino)]
    }
}
