import AgentCore
import FoundationEssentials
import Logging
import Metrics
import NIOCore
import Synchronization

/// The reconnecting PTY of tailnet port 2 (the dashboard's web terminal): sessions by ID,
/// each a process on a terminal (see ``PTYSession``), attached to by connections (see
/// ``PTYConnectionHandler``).
///
/// Bounds: at most ``Limits/maxSessions`` sessions (a connection for a new ID beyond it is
/// closed), ``Limits/maxAttachments`` connections attached to one session, and
/// ``Limits/maxConnections`` connections in all (further ones are closed at once).
public final class ReconnectingPTYServer: Sendable {
    public struct Limits: Sendable {
        /// Sessions (each a process, a terminal and a waiting thread) at once.
        public var maxSessions = 64
        /// Connections attached to one session at once.
        public var maxAttachments = 16
        /// Connections at once, attached or still sending their init.
        public var maxConnections = 256
        /// A session nobody attached to ends this long after its creation, and one whose
        /// last connection detached this long after that.
        public var attachTimeout = PTYLifetime.defaultAttachTimeout
        public var idleTimeout = PTYLifetime.defaultIdleTimeout
        /// How the lifetime's timers wait (a test's clock can stand in).
        public var sleep: @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }

        public init() {}
    }

    /// How long a connection may take to send its init frame.
    let initTimeout: TimeAmount = .seconds(30)
    let limits: Limits
    let manifest: any ManifestSource
    let environment: [String: String]
    let logger: Logger
    private let sessions = Mutex<[String: PTYSession]>([:])
    private let connections: BoundedRegistry<any Channel>
    /// Set by ``closeAll()``: connections ending after it end for the shutdown.
    private let closing = Mutex(false)
    private let connectionsTotal = Counter(label: "agent_reconnecting_pty_connections_total")
    private let sessionsGauge = Gauge(label: "agent_reconnecting_pty_sessions")

    /// Where each connection's CONNECT and DISCONNECT go, and the count of connections the
    /// stats report sends as `session_count_reconnecting_pty`.
    let upward: any UpwardSink
    let counts: SessionCounts

    public init(
        manifest: any ManifestSource, environment: [String: String], limits: Limits = Limits(),
        upward: any UpwardSink = DiscardingUpward(), counts: SessionCounts = SessionCounts(), logger: Logger
    ) {
        self.upward = upward
        self.counts = counts
        self.manifest = manifest
        self.environment = environment
        self.limits = limits
        connections = BoundedRegistry(capacity: limits.maxConnections)
        self.logger = logger
    }

    /// Serves `channel` (on its loop, before it is active) as one reconnecting-PTY connection.
    public func serve(_ channel: any Channel) -> EventLoopFuture<Void> {
        guard connections.admit(ObjectIdentifier(channel), channel) else {
            logger.warning("too many reconnecting pty connections; refused one", metadata: ["max": "\(limits.maxConnections)"])
            return channel.close()
        }
        connectionsTotal.increment()
        // Reported at once, before the init is read (the reference's order); the end is
        // graceful unless the agent is shutting it down.
        let connect = ConnectionReport(
            id: ConnectionReport.newID(), action: .connect, kind: .reconnectingPTY, ip: channel.remoteAddress?.ipAddress ?? "")
        upward.send(connect)
        counts.started(.reconnectingPTY)
        channel.closeFuture.whenComplete { [self] _ in
            connections.remove(ObjectIdentifier(channel))
            counts.ended(.reconnectingPTY)
            var disconnect = connect
            disconnect.action = .disconnect
            disconnect.timestamp = Date()
            let shuttingDown = closing.withLock { $0 }
            disconnect.statusCode = shuttingDown ? 1 : 0
            disconnect.reason = shuttingDown ? "server_shutdown" : "graceful"
            upward.send(disconnect)
        }
        return channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(PTYConnectionHandler(server: self))
        }
    }

    /// The session of `frame`'s ID, created (its process started on `loop`) when there is
    /// none; nil at the cap or when the process cannot start.
    func session(for frame: PTYInit, on loop: any EventLoop) -> PTYSession? {
        let result = sessions.withLock { sessions -> Result<PTYSession, SessionProcess.SpawnError>? in
            if let existing = sessions[frame.id] { return .success(existing) }
            guard sessions.count < limits.maxSessions else { return nil }
            let current = manifest.currentManifest
            let shell = SessionCommand.loginShell(environment: environment) ?? "/bin/sh"
            let user = SessionCommand.currentUserName() ?? environment["USER"] ?? ""
            var variables = SessionVariables.base(agent: environment, manifest: current?.environment ?? [:], user: user, shell: shell)
            Self.addTerminalVariables(&variables)
            let process: SessionProcess
            do throws(SessionProcess.SpawnError) {
                process = try SessionProcess.spawn(
                    argv: SessionCommand(shell: shell, command: frame.command).argv, environment: { _ in variables },
                    directory: SessionCommand.workingDirectory(manifestDirectory: current?.directory, environment: environment),
                    terminal: (frame.height == 0 ? 24 : frame.height, frame.width == 0 ? 80 : frame.width))
            } catch {
                return .failure(error)
            }
            let session = PTYSession(
                id: frame.id, loop: loop, process: process,
                lifetime: PTYLifetime(attachTimeout: limits.attachTimeout, idleTimeout: limits.idleTimeout),
                maxAttachments: limits.maxAttachments, sleep: limits.sleep
            ) { [self] ended in forget(ended) }
            sessions[frame.id] = session
            return .success(session)
        }
        sessionsGauge.record(count)
        switch result {
        case .success(let session)?:
            return session
        case .failure(let error)?:
            logger.warning("reconnecting pty did not start", metadata: ["error": "\(error)"])
            return nil
        case nil:
            logger.warning("too many reconnecting pty sessions; refused a new one", metadata: ["max": "\(limits.maxSessions)"])
            return nil
        }
    }

    private func forget(_ session: PTYSession) {
        sessions.withLock { sessions in
            if sessions[session.id] === session { sessions[session.id] = nil }
        }
        sessionsGauge.record(count)
    }

    /// `TERM=xterm-256color`, and `LC_CTYPE=C.UTF-8` unless `LC_ALL` is set or the first of
    /// `LC_CTYPE` and `LANG` that is set names UTF-8 (the reference's rule).
    static func addTerminalVariables(_ variables: inout [String: String]) {
        variables["TERM"] = "xterm-256color"
        if let all = variables["LC_ALL"], !all.isEmpty { return }
        let current = [variables["LC_CTYPE"], variables["LANG"]].compactMap { $0 }.first { !$0.isEmpty } ?? ""
        let upper = current.uppercased()
        if !upper.contains("UTF-8") && !upper.contains("UTF8") { variables["LC_CTYPE"] = "C.UTF-8" }
    }

    /// Sessions now.
    public var count: Int { sessions.withLock { $0.count } }

    /// Ends every session (their processes get SIGHUP and SIGKILL) and closes every connection.
    public func closeAll() {
        closing.withLock { $0 = true }
        for session in sessions.withLock({ Array($0.values) }) { session.terminate() }
        for channel in connections.all { channel.close(promise: nil) }
    }
}
