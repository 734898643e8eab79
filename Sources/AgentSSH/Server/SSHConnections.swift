import AgentCore
import Metrics
import NIOCore

/// Where an SSH connection came from. Each source has a cap of its own, so that connections
/// to one (a flood of the loopback listener by a workspace process) cannot lock the other
/// (`coder ssh` through the tailnet) out.
public enum SSHConnectionSource: String, Sendable, CaseIterable {
    /// Tailnet ports 1 and 22.
    case tailnet
    /// The `--ssh-address` listener.
    case loopback
}

/// The bounds of the SSH server's connections, per server (tests make them small).
struct SSHConnectionLimits: Sendable, Equatable {
    /// Connections of one source at once.
    static let defaultMaxConnectionsPerSource = 256
    /// From accept to authentication. OpenSSH's LoginGraceTime is 120 s, time to type a
    /// password; here authentication is `none` and a handshake is a few round trips, so
    /// 60 s still leaves a slow relayed (DERP) path ample room.
    static let defaultHandshakeTimeout: Duration = .seconds(60)
    /// At agent shutdown, from SIGTERM to a session's process group to SIGKILL (the process
    /// API's own, as docs/limits.md promises for everything the agent started).
    static let defaultShutdownGrace: Duration = .seconds(5)

    var maxConnectionsPerSource = Self.defaultMaxConnectionsPerSource
    var handshakeTimeout = Self.defaultHandshakeTimeout
    var maxSessions = SessionRegistry.defaultMaxSessions
    var shutdownGrace = Self.defaultShutdownGrace
}

/// The SSH server's open connections, one ``ConnectionRegistry`` per source: a connection is
/// idle (evictable) from its accept until it authenticates, then busy (never evicted). A
/// newcomer beyond its source's cap closes that source's oldest unauthenticated connection,
/// so connections that say nothing cannot lock clients out; when all are authenticated it is
/// refused.
///
/// Memory: one small entry per open connection, at most the cap per source.
final class SSHConnections: Sendable {
    private let registries: [SSHConnectionSource: ConnectionRegistry]

    init(maxPerSource: Int) {
        var registries: [SSHConnectionSource: ConnectionRegistry] = [:]
        for source in SSHConnectionSource.allCases {
            let dimensions = [("source", source.rawValue)]
            let open = Gauge(label: "agent_ssh_connections", dimensions: dimensions)
            let evicted = Counter(label: "agent_ssh_preauth_evicted_total", dimensions: dimensions)
            let refused = Counter(label: "agent_ssh_connections_refused_total", dimensions: dimensions)
            registries[source] = ConnectionRegistry(
                maxConnections: maxPerSource, whenAllBusy: .refuse,
                observer: .init(open: { open.record($0) }, evicted: { evicted.increment() }, refused: { refused.increment() }))
        }
        self.registries = registries
    }

    func registry(_ source: SSHConnectionSource) -> ConnectionRegistry { registries[source]! }

    /// Admits `channel` (closing an unauthenticated one of its source if full) and forgets it
    /// when it closes; nil when refused (the caller closes it).
    func admit(_ channel: any Channel, from source: SSHConnectionSource) -> ConnectionRegistry.Connection? {
        guard let connection = admit(from: source, close: { channel.close(promise: nil) }) else { return nil }
        channel.closeFuture.whenComplete { [self] _ in closed(connection, from: source) }
        return connection
    }

    /// Admits a connection that `close` ends (closing an unauthenticated one of `source` to
    /// make room); nil when refused. ``closed(_:from:)`` forgets it.
    func admit(from source: SSHConnectionSource, close: @escaping @Sendable () -> Void) -> ConnectionRegistry.Connection? {
        guard case .admitted(let connection, _) = registry(source).register(close: close) else { return nil }
        return connection
    }

    func closed(_ connection: ConnectionRegistry.Connection, from source: SSHConnectionSource) {
        registry(source).remove(connection.id)
    }

    /// `connection` authenticated: no longer evictable.
    func authenticated(_ connection: ConnectionRegistry.Connection, from source: SSHConnectionSource) {
        registry(source).setPhase(connection, .busy(since: ConnectionRegistry.uptimeNanoseconds()))
    }

    /// Closes every connection and admits no more.
    func closeAll() {
        for registry in registries.values { registry.closeAll() }
    }
}
