import AgentCore
import Logging
import NIOCore
import NIOPosix
import NIOSSH
import ServiceLifecycle
import Synchronization

/// The SSH server: one NIOSSH pipeline per connection, whatever its source (the loopback
/// listener, tailnet ports 1 and 22), with the host key of the current manifest, no client
/// authentication, and `session` channels (other channel types are refused).
///
/// Bounds (``SSHConnectionLimits``): per source (``SSHConnectionSource``) at most
/// ``SSHConnectionLimits/maxConnectionsPerSource`` connections (``SSHConnections``: a
/// newcomer beyond it closes the oldest unauthenticated one, or is closed when all have
/// authenticated), each with ``SSHConnectionLimits/handshakeTimeout`` to authenticate; at most
/// ``SessionRegistry/maxSessions`` running sessions, and at most ``maxChannelsPerConnection``
/// open channels on one connection (further opens are refused).
final class SSHServer: Sendable {
    static let maxChannelsPerConnection = 64

    let manifest: any ManifestSource
    let environment: [String: String]
    let limits: SSHConnectionLimits
    let sessions: SessionRegistry
    let logger: Logger
    let connections: SSHConnections

    /// Running sessions by kind, for the stats report.
    let counts: SessionCounts

    let policy: SSHPolicy
    /// Where sessions' connection reports go.
    let upward: any UpwardSink
    /// The control plane's announcement banners, which login shells show.
    let banners: AnnouncementBanners
    /// `--ssh-max-timeout` for each connection.
    let timeoutRule: SSHTimeoutRule
    /// Every command's layers over a session's variables.
    let command: CommandEnvironment

    init(
        manifest: any ManifestSource, environment: [String: String], policy: SSHPolicy = SSHPolicy(), counts: SessionCounts = SessionCounts(),
        upward: any UpwardSink = DiscardingUpward(), banners: AnnouncementBanners = AnnouncementBanners(),
        timeoutRule: SSHTimeoutRule = SSHTimeoutRule(maxTimeout: SSHTimeoutRule.defaultTimeout), limits: SSHConnectionLimits = SSHConnectionLimits(),
        command: CommandEnvironment = CommandEnvironment(), logger: Logger
    ) {
        self.limits = limits
        self.command = command
        sessions = SessionRegistry(maxSessions: limits.maxSessions)
        connections = SSHConnections(maxPerSource: limits.maxConnectionsPerSource)
        self.timeoutRule = timeoutRule
        self.upward = upward
        self.banners = banners
        self.policy = policy
        self.counts = counts
        self.manifest = manifest
        self.environment = environment
        self.logger = logger
    }

    /// Sets up `channel` (on its event loop, before it is active) as an SSH connection from
    /// `source`.
    func serve(_ channel: any Channel, from source: SSHConnectionSource) -> EventLoopFuture<Void> {
        guard let admitted = connections.admit(channel, from: source) else {
            logger.warning(
                "too many SSH connections; refused one",
                metadata: ["max": "\(limits.maxConnectionsPerSource)", "source": "\(source.rawValue)"])
            return channel.close()
        }
        let current = manifest.currentManifest
        let policy = self.policy
        let parsing = SSHParsingScopeHandler(policy: policy, loop: channel.eventLoop)
        let gate = parsing.gate
        let forwarding = ReverseForwarding(loop: channel.eventLoop, refused: policy.blockReversePortForwarding, gate: gate)
        channel.closeFuture.whenComplete { _ in forwarding.closeAll() }
        let timeout = SSHTimeoutHandler(rule: timeoutRule, handshake: limits.handshakeTimeout, logger: logger)
        let boundTimeout = NIOLoopBound(timeout, eventLoop: channel.eventLoop)
        let authentication = NoClientAuthentication { [connections] in
            connections.authenticated(admitted, from: source)
            boundTimeout.value.authenticated()
        }
        var configuration = SSHServerConfiguration(
            hostKeys: [SSHHostKey.key(for: current)], userAuthDelegate: authentication, globalRequestDelegate: forwarding)
        // AES-GCM with the rewriter that lets OpenSSH's extensions through swift-nio-ssh.
        configuration.transportProtectionSchemes = [InterposingAES128GCM.self, InterposingAES256GCM.self]
        let builder = sessionEnvironment(current)
        let directory = workingDirectory(current)
        let motdFile = current?.motdFile ?? ""
        let sessions = self.sessions
        let counts = self.counts
        let upward = self.upward
        let banners = self.banners
        let logger = self.logger
        let channels = Mutex(0)
        let jetbrains = JetBrainsForward(counts: counts, upward: upward)
        let initialize = { (child: any Channel, type: SSHChannelType) -> EventLoopFuture<Void> in
            let open = channels.withLock { count -> Bool in
                guard count < Self.maxChannelsPerConnection else { return false }
                count += 1
                return true
            }
            guard open else { return child.eventLoop.makeFailedFuture(SSHServerError.tooManyChannels) }
            child.closeFuture.whenComplete { _ in channels.withLock { $0 -= 1 } }
            switch type {
            case .session: break
            case .directTCPIP(let target):
                if let marked = DirectStreamLocal.route(child, to: target, policy: policy) { return marked }
                guard !policy.blockLocalPortForwarding else {
                    return child.eventLoop.makeFailedFuture(SSHServerError.portForwardingDisabled)
                }
                return DirectTCPIP.open(child, to: target, jetbrains: jetbrains)
            default: return child.eventLoop.makeFailedFuture(SSHServerError.unsupportedChannelType)
            }
            return child.eventLoop.makeCompletedFuture {
                let session = SSHSessionHandler(
                    environment: builder, directory: directory, policy: policy, sessions: sessions, counts: counts, upward: upward,
                    logger: logger)
                session.motdFile = motdFile
                session.banners = banners
                try child.pipeline.syncOperations.addHandler(session)
            }
        }
        return channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(timeout)
            try channel.pipeline.syncOperations.addHandler(parsing)
            try channel.pipeline.syncOperations.addHandler(
                NIOSSHHandler(
                    role: .server(configuration), allocator: channel.allocator,
                    inboundChildChannelInitializer: { child, type in
                        // First in its pipeline; its open's reply waits for a key exchange under way.
                        do { try RekeyHold.install(child, gate: gate) } catch {
                            return child.eventLoop.makeFailedFuture(error)
                        }
                        return gate.afterOpen(initialize(child, type))
                    }))
            try channel.pipeline.syncOperations.addHandler(ConnectionWritability(gate: gate))
            try channel.pipeline.syncOperations.addHandler(SSHConnectionErrors(logger: logger))
        }
    }

    /// Closes every connection (their sessions' processes get SIGHUP) and admits no more.
    func closeAll() {
        connections.closeAll()
    }

    /// Agent shutdown: closes every connection, then ends every session process not yet
    /// reaped, those that ignore the hangup too: SIGTERM to its group, SIGKILL after
    /// ``SSHConnectionLimits/shutdownGrace``.
    func shutdown() async {
        closeAll()
        await sessions.terminateProcesses(grace: limits.shutdownGrace)
    }

    private func sessionEnvironment(_ manifest: AgentManifest?) -> SessionEnvironmentBuilder {
        let shell = SessionCommand.loginShell(environment: environment) ?? "/bin/sh"
        let user = SessionCommand.currentUserName() ?? environment["USER"] ?? ""
        return SessionEnvironmentBuilder(agent: environment, manifest: manifest, command: command, user: user, shell: shell)
    }

    /// The manifest's directory when it is one, else the user's home (the reference's rule).
    private func workingDirectory(_ manifest: AgentManifest?) -> String {
        if let directory = manifest?.directory, !directory.isEmpty, FileInfo.following(path: directory)?.kind == .directory { return directory }
        return SessionCommand.homeDirectory(environment: environment)
    }
}

enum SSHServerError: Error {
    case unsupportedChannelType
    case tooManyChannels
    case portForwardingDisabled
}

/// Logs what ends a connection with an error and closes it.
private final class SSHConnectionErrors: ChannelInboundHandler {
    typealias InboundIn = Any
    let logger: Logger
    init(logger: Logger) { self.logger = logger }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("ssh connection error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }
}
