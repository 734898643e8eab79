import AgentCore
import Hummingbird
import HummingbirdCore
import HTTPTypes
import Logging
import NIOCore
import NIOPosix

/// How one connection is served, apart from where connections come from: the route table
/// (every mount's routes, `/healthz`, the WebSocket routes), the guards, limits and deadlines, and
/// the connection registry. Built once from the mounts; then any number of sources hand it
/// connections: a listener (``application(address:listener:onServerRunning:)``, Hummingbird's
/// `Server` accepting on a bound socket) and ``serve(_:listener:remote:)`` (channels another
/// module received, such as the tailnet's), all counted against the same registry.
///
/// Hummingbird's model: this is the `ServerChildChannel` (``AgentHTTPChannel``: set a
/// connection's pipeline up, then serve it) with what every connection shares; the source
/// is the `Server.run()` loop around it.
public final class AgentHTTPServing: Sendable {
    /// The open connections, from every source (the host stops and closes them at shutdown).
    public let connections: HTTPConnectionRegistry
    /// The server's logger.
    public let logger: Logger
    /// Every route, as the responder and the connection core ask for them.
    public let routes: RouteTable
    /// How every connection is set up and served (its origin is set per source).
    let childChannel: AgentHTTPChannel

    /// Builds the routes and the per-connection setup.
    /// - Parameters:
    ///   - mounts: every capability module's routes, each at its base path.
    ///   - connections: the open connections (the host stops and closes them at shutdown).
    ///   - accessLog: log one line per request at info (``AccessLog``); off, requests are
    ///     logged at debug only.
    ///   - logger: server logger; at trace it logs each route mounted.
    public init(
        mounts: [HTTPMount],
        connections: HTTPConnectionRegistry = HTTPConnectionRegistry(),
        headTimeout: Duration = AgentHTTPLimits.requestHeadTimeout,
        bodyTimeout: Duration = AgentHTTPLimits.requestBodyTimeout,
        webSocketPingInterval: Duration = AgentHTTPLimits.webSocketPingInterval,
        writeStallTimeout: Duration = AgentHTTPLimits.responseWriteStallTimeout,
        accessLog: Bool = true,
        logger: Logger
    ) {
        self.connections = connections
        self.logger = logger
        // Without the access log, requests are logged at debug: at a higher level the
        // middleware would only cost its layer (two executor checks and a closure per
        // request), so it is left out.
        let middleware: [any MiddlewareProtocol<Request, Response, AgentRequestContext>] =
            !accessLog && logger.logLevel <= .debug ? [LogRequestsMiddleware(.debug)] : []
        // One table: every mount's routes, `/healthz`, the WebSocket routes and their twins.
        let table: RouteTable
        do {
            table = try RouteTable(mounts: mounts, middleware: middleware)
        } catch {
            // A module declared routes that clash: a programming error, caught by any test
            // that starts the agent.
            preconditionFailure("\(error)")
        }
        self.routes = table
        if logger.logLevel <= .trace {
            // What is mounted, one line per route (the OpenAPI document's test reads them).
            for route in table.routeList {
                logger.trace(
                    "route mounted",
                    metadata: [
                        "method": "\(route.method)", "path": "\(route.path)", "websocket": "\(route.webSocket)",
                    ])
            }
        }
        var machine = HTTP1ConnectionHandler.Machine.Configuration()
        // Deadlines for connections that stall before, between or inside requests; none
        // closes a connection whose request is being handled (wait=true lasts 5 min).
        machine.headTimeout = headTimeout
        machine.bodyTimeout = bodyTimeout
        machine.webSocketPingInterval = webSocketPingInterval
        machine.writeStallTimeout = writeStallTimeout
        machine.maxWebSockets = connections.maxWebSockets
        childChannel = AgentHTTPChannel(
            http: .init(
                responder: AgentResponder(table: table), serverName: Self.serverName, logger: logger, accessLog: accessLog, routes: table,
                machine: machine, registry: connections),
            // A client that never answers our close frame is dropped after 2 s. Pings are
            // the connection core's (on raw bytes, whether or not a route reads what the
            // client sends), not the WebSocket session's.
            webSocket: .init(maxFrameSize: WebSocketLimits.maxFrameBytes, closeTimeout: .seconds(2)),
            decoderLimits: (AgentHTTPLimits.maxHeaderFieldSize, AgentHTTPLimits.maxHeaderListSize, AgentHTTPLimits.maxHeaderFieldCount),
            origin: .http)
    }

    /// The `Server` header of every answer.
    static let serverName = "workspace-agent"

    /// A listener serving these routes: a `Service` (``AgentHTTPListener``) that binds
    /// `address` and serves every connection it accepts here, each with `listener` as its
    /// origin.
    /// - Parameter onServerRunning: called with the listening channel (its local address
    ///   carries the real port).
    public func application(
        address: BindTarget, listener: String = ListenerName.http,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        onServerRunning: @escaping @Sendable (any Channel) async -> Void = { _ in }
    ) -> AgentHTTPServer.App {
        let logger = logger
        // A unix listener goes through AgentCore's SocketFile like every unix socket of the
        // agent: bound in a private directory, given mode 0600 and renamed into place once
        // listening; removed when the listener closes, if it is still ours. Where the path
        // is not available (a live socket there), the bind at the path itself fails as
        // before ("address already in use").
        var bindAddress = address.bindAddress
        var unixSocket: (file: SocketFile, staged: SocketFile.Staging)?
        if case .unix(let path) = address.kind {
            let file = SocketFile(path: path, stalePolicy: .socketOnly)
            if let staged = try? file.makeStaging() {
                bindAddress = .unixDomainSocket(path: staged.socket)
                unixSocket = (file, staged)
            }
        }
        let installThenRun: @Sendable (any Channel) async -> Void = { [unixSocket] channel in
            if let (file, staged) = unixSocket {
                do {
                    let identity = try file.install(staged: staged)
                    channel.closeFuture.whenComplete { _ in file.remove(ifStill: identity) }
                } catch {
                    logger.critical("cannot listen on \(address): \(error)")
                    try? await channel.close()
                    return
                }
            }
            await onServerRunning(channel)
        }
        // No accept limit here: the registry caps open connections by closing the
        // longest-idle one, so a flood of idle connections cannot lock others out.
        return AgentHTTPListener(
            child: childChannel.from(ConnectionOrigin(listener: listener)),
            configuration: ServerConfiguration(address: bindAddress, serverName: Self.serverName), onServerRunning: installThenRun,
            eventLoopGroup: eventLoopGroup, logger: logger)
    }
}
