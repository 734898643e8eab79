import AgentCore
import AgentHTTP
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle

/// SSH into the workspace: the server of tailnet ports 1 and 22 (the reference's
/// `coder ssh`, `config-ssh` and Coder Connect entry) and, with `--ssh-address`, the same
/// server on a loopback listener.
public struct SSHModule: AgentModule {
    public var name: String { "ssh" }

    let configuration: SSHOptions.Configuration
    let server: SSHServer

    public init(configuration: SSHOptions.Configuration, context: AgentContext, logger: Logger) {
        self.configuration = configuration
        server = SSHServer(
            manifest: context.manifest, environment: context.environment, policy: configuration.policy, counts: context.sessionCounts, upward: context.upward,
            banners: context.announcementBanners, timeoutRule: SSHTimeoutRule(maxTimeout: configuration.maxTimeout),
            command: context.commandEnvironment, logger: logger)
        // Only with --ssh-allow-non-loopback (the options refuse it otherwise); the HTTP API's
        // warning has the same words.
        if let address = configuration.address, !address.isLoopback {
            logger.warning(
                "\(HTTPOptions.beyondLoopbackWarning("SSH server"))",
                metadata: ["address": "\(address)", "authentication": "none", "flag": "--ssh-allow-non-loopback"])
        }
    }

    /// Serves `channel` (a tunnel connection to port 1 or 22, on its loop, not active yet).
    public func serve(_ channel: any Channel) -> EventLoopFuture<Void> {
        server.serve(channel, from: .tailnet)
    }

    public var services: [ModuleService] {
        var services: [ModuleService] = []
        if let address = configuration.address {
            services.append(ModuleService("ssh listener", SSHListener(address: address, server: server), stopsIn: .work, onSuccess: .ignore))
        }
        // Connections close (sessions get SIGHUP), then every session process still running
        // gets SIGTERM to its group and SIGKILL 5 s later.
        services.append(.onShutdown("ssh sessions", in: .work) { [server] in await server.shutdown() })
        return services
    }
}

/// The loopback listener: accepts connections until graceful shutdown, then stops
/// accepting and closes the open ones.
struct SSHListener: Service {
    let address: BindTarget
    let server: SSHServer

    func run() async throws {
        guard case .tcp(let host, let port) = address.kind else { return }
        let server = self.server
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 64)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in server.serve(channel, from: .loopback) }
            .bind(host: host, port: port)
            .get()
        let bound = channel.localAddress?.port ?? port
        server.logger.info("ssh listening", metadata: ["ssh_address": "\(host.contains(":") ? "[\(host)]" : host):\(bound)"])
        await withGracefulShutdownHandler {
            try? await channel.closeFuture.get()
        } onGracefulShutdown: {
            channel.close(promise: nil)
        }
        server.closeAll()
    }
}
