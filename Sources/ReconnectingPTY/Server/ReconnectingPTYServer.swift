import AgentCore
import FoundationEssentials
import Logging
import Metrics
import NIOCore
import Synchronization

/// The reconnecting PTY of tailnet port 2 (the dashboard's web terminal): sessions by ID,
/// each a process on a terminal (``PTYSession``, the buffered backend) or a GNU screen
/// session (``ScreenSession``), attached to by connections (see ``PTYConnectionHandler``).
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
        /// After a session's process exits, how long it waits for the end of the terminal's
        /// output (a background job may keep the terminal open) before it ends anyway.
        public var exitDrainBound: TimeAmount = .seconds(2)
        /// At the agent's shutdown, from SIGTERM to a session's processes to SIGKILL.
        public var shutdownGrace: TimeAmount = .seconds(5)
        /// How the lifetime's timers wait (a test's clock can stand in).
        public var sleep: @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }
        /// The screen backend's program, looked up on the agent's `PATH` (nil: never screen).
        public var screenProgram: String? = "screen"
        /// Where the screen backend keeps its config and sockets (nil: `$TMPDIR/coder-screen`).
        public var screenDirectory: String?

        public init() {}
    }

    /// How long a connection may take to send its init frame.
    let initTimeout: TimeAmount = .seconds(30)
    let limits: Limits
    let manifest: any ManifestSource
    let environment: [String: String]
    let logger: Logger
    private let sessions = Mutex<[String: any ReconnectingSession]>([:])
    private let connections: BoundedRegistry<any Channel>
    /// Set by ``closeAll()``: connections ending after it end for the shutdown.
    private let closing = Mutex(false)
    private let connectionsTotal = Counter(label: "agent_reconnecting_pty_connections_total")
    private let sessionsGauge = Gauge(label: "agent_reconnecting_pty_sessions")

    /// Where each connection's CONNECT and DISCONNECT go, and the count of connections the
    /// stats report sends as `session_count_reconnecting_pty`.
    let upward: any UpwardSink
    let counts: SessionCounts
    /// Every command's layers over a session's variables.
    let command: CommandEnvironment

    public init(
        manifest: any ManifestSource, environment: [String: String], limits: Limits = Limits(),
        upward: any UpwardSink = DiscardingUpward(), counts: SessionCounts = SessionCounts(),
        command: CommandEnvironment = CommandEnvironment(), logger: Logger
    ) {
        self.command = command
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
        // Once shutdown began no connection is served: a session made now would not be ended.
        guard !closing.withLock({ $0 }) else { return channel.close() }
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

    /// The session of `frame`'s ID, created (on `loop`) when there is none, by the backend
    /// ``PTYBackend`` picks; nil at the cap or when it cannot start.
    func session(for frame: PTYInit, on loop: any EventLoop) -> (any ReconnectingSession)? {
        var shuttingDown = false
        let result = sessions.withLock { sessions -> Result<any ReconnectingSession, SessionProcess.SpawnError>? in
            // Read under the sessions' lock, where closeAll and shutdown set it and take their
            // list: a session is either on that list or never made.
            guard !closing.withLock({ $0 }) else {
                shuttingDown = true
                return nil
            }
            if let existing = sessions[frame.id] { return .success(existing) }
            guard sessions.count < limits.maxSessions else { return nil }
            let current = manifest.currentManifest
            let shell = SessionCommand.loginShell(environment: environment) ?? "/bin/sh"
            let user = SessionCommand.currentUserName() ?? environment["USER"] ?? ""
            var variables = command.apply(
                to: SessionVariables.base(agent: environment, manifest: [:], user: user, shell: shell), manifest: current)
            Self.addTerminalVariables(&variables)
            let argv = SessionCommand(shell: shell, command: frame.command).argv
            let directory = SessionCommand.workingDirectory(manifestDirectory: current?.directory, environment: environment)
            let lifetime = PTYLifetime(attachTimeout: limits.attachTimeout, idleTimeout: limits.idleTimeout)
            if let screen = screenControl(for: frame, variables: variables, directory: directory) {
                let session = ScreenSession(
                    id: frame.id, loop: loop, control: screen, command: argv, lifetime: lifetime, maxAttachments: limits.maxAttachments,
                    exitDrainBound: limits.exitDrainBound, logger: logger, sleep: limits.sleep, countError: { Counter(label: "agent_reconnecting_pty_errors_total", dimensions: [("error_type", $0)]).increment() }
                ) { [self] ended in forget(ended) }
                sessions[frame.id] = session
                return .success(session)
            }
            let process: SessionProcess
            do throws(SessionProcess.SpawnError) {
                process = try SessionProcess.spawn(
                    argv: argv, environment: { _ in variables }, directory: directory,
                    terminal: (frame.height == 0 ? 24 : frame.height, frame.width == 0 ? 80 : frame.width))
            } catch {
                return .failure(error)
            }
            let session = PTYSession(
                id: frame.id, loop: loop, process: process, lifetime: lifetime, maxAttachments: limits.maxAttachments, exitDrainBound: limits.exitDrainBound, logger: logger,
                sleep: limits.sleep
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
        case nil where shuttingDown:
            logger.info("reconnecting pty refused: the agent is shutting down", metadata: ["id": "\(frame.id)"])
            return nil
        case nil:
            logger.warning("too many reconnecting pty sessions; refused a new one", metadata: ["max": "\(limits.maxSessions)"])
            return nil
        }
    }

    /// How a new session of `frame` reaches its screen session, or nil when the buffered
    /// backend serves it (screen not asked for, not installed, or its directory unusable;
    /// the last two are logged when screen was asked for by name).
    private func screenControl(for frame: PTYInit, variables: [String: String], directory: String) -> ScreenControl? {
        let found = limits.screenProgram.flatMap { ExecutableLookup.find($0, path: environment["PATH"]) }
        let (backend, note) = PTYBackend.choose(requested: frame.backendType, screenPath: found.flatMap { $0.hasPrefix("/") ? $0 : nil })
        if let note { logger.info("reconnecting pty: \(note)", metadata: ["id": "\(frame.id)"]) }
        guard case .screen(let program) = backend else { return nil }
        let screenDirectory = ScreenDirectory(base: limits.screenDirectory ?? ScreenDirectory.defaultBase(environment: environment))
        do throws(ScreenDirectory.SetupError) {
            try screenDirectory.prepare()
        } catch {
            logger.warning("reconnecting pty: screen cannot be used; the buffered backend serves the session", metadata: ["error": "\(error)"])
            return nil
        }
        var screenVariables = variables
        screenVariables["SCREENDIR"] = screenDirectory.sockets
        return ScreenControl(
            program: program, name: Self.screenName(), directory: screenDirectory, environment: screenVariables, workingDirectory: directory)
    }

    /// A screen session's name: 8 random hex characters (short, for the socket path's limit).
    static func screenName() -> String {
        let hex = String(UInt32.random(in: .min ... .max), radix: 16)
        return String(repeating: "0", count: 8 - hex.count) + hex
    }

    private func forget(_ session: any ReconnectingSession) {
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

    /// Ends every session (their processes get SIGHUP and SIGKILL, screen sessions are quit)
    /// and closes every connection; the futures complete as each session has ended.
    @discardableResult
    public func closeAll() -> [EventLoopFuture<Void>] {
        let ended = sessions.withLock { sessions in
            closing.withLock { $0 = true }
            return Array(sessions.values)
        }.map { $0.terminate() }
        for channel in connections.all { channel.close(promise: nil) }
        return ended
    }

    /// The agent's shutdown: as ``closeAll()``, but a session's processes get SIGTERM, and
    /// SIGKILL after ``Limits/shutdownGrace`` (for the buffered backend; screen's sessions are
    /// quit, bounded by ``ScreenCommandPoll``); waits until every session has ended.
    public func shutdown() async {
        let ended = sessions.withLock { sessions in
            closing.withLock { $0 = true }
            return Array(sessions.values)
        }.map { $0.shutdown(grace: limits.shutdownGrace) }
        for channel in connections.all { channel.close(promise: nil) }
        for session in ended { try? await session.get() }
    }
}
