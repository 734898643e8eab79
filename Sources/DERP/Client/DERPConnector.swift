import AgentTLS
import NIOCore
import NIOPosix
import OutboundProxy

/// Dials one DERP connection: TCP to the node's addresses in order,
/// TLS with ALPN `http/1.1` unless `force_http`, then `Upgrade: DERP` or a WebSocket
/// with subprotocol `derp`, then the DERP handshake — all within one deadline. Behind a proxy
/// (chosen as Tailscale chooses it: `HTTPS_PROXY` for `https://<host>`, whatever the node's
/// scheme) it connects once, to the node's name through the proxy's `CONNECT`, on the node's
/// port (Tailscale always asks for 443, so a relay on another port is unreachable through it).
enum DERPConnector {
    struct Parameters: Sendable {
        var node: DERPNode
        var transport: DERPTransport
        var privateKey: X25519PrivateKey
        var isHome: Bool
        var connectTimeout: TimeAmount
        var readTimeout: TimeAmount
        var maxQueuedPackets: Int
        var maxQueuedBytes: Int
        var counters: DERPCounters
        var delegate: any DERPConnectionDelegate
        var proxies: ProxyEnvironment
    }

    /// Connects, trying the node's addresses in order until one finishes the handshake;
    /// an HTTP refusal ends the attempt at once (it is the server's answer, not the path's).
    static func connect(_ parameters: Parameters, group: any EventLoopGroup) async throws(DERPConnectError) -> DERPConnection {
        let deadline = NIODeadline.now() + parameters.connectTimeout
        let node = parameters.node
        let route: ProxyRoute
        do {
            route =
                node.hostName.isEmpty
                ? .direct
                // Chosen for the certificate's name, as Tailscale chooses it; the tunnel goes to the host.
                : try ProxyRoute.choose(
                    scheme: "https", host: node.tlsIdentity, port: node.port, environment: parameters.proxies,
                    alwaysTunnel: true)
        } catch {
            throw .failed(error.description)
        }
        if route != .direct {
            return try await connectOnce(parameters, host: node.hostName, route: route, deadline: deadline, group: group)
        }
        let hosts = node.dialHosts
        guard !hosts.isEmpty else { throw .noAddress }
        var lastError = DERPConnectError.noAddress
        // Bounded: at most two addresses (the IPv4 and IPv6 overrides) or one name.
        for host in hosts {
            guard NIODeadline.now() < deadline else { throw .timedOut }
            do {
                return try await connectOnce(parameters, host: host, route: .direct, deadline: deadline, group: group)
            } catch {
                if case .refused = error { throw error }
                if case .negotiatedHTTP2 = error { throw error }
                lastError = error
            }
        }
        throw lastError
    }

    /// One attempt on `host` (an address or the node's name), through `route`.
    private static func connectOnce(
        _ p: Parameters, host: String, route: ProxyRoute, deadline: NIODeadline, group: any EventLoopGroup
    ) async throws(DERPConnectError) -> DERPConnection {
        let sslContext: TLSContext?
        do {
            sslContext = p.node.forceHTTP ? nil : try await makeSSLContext(insecure: p.node.insecureForTests, deadline: deadline)
        } catch {
            // TLSError's own text says what failed ("TLS configuration: …", "TLS setup timed out: …").
            throw .failed("\(error)")
        }
        let loop = group.next()
        let attempt = DERPConnectAttempt(promise: loop.makePromise(of: DERPConnection.self))
        let ended = loop.makePromise(of: DERPConnectionEnd.self)
        let timer = loop.scheduleTask(deadline: deadline) { attempt.fail(.timedOut) }
        let setup = DERPConnectionHandler.Setup(
            privateKey: p.privateKey, node: p.node, transport: p.transport, isHome: p.isHome, readTimeout: p.readTimeout,
            maxQueuedPackets: p.maxQueuedPackets, maxQueuedBytes: p.maxQueuedBytes, counters: p.counters, delegate: p.delegate,
            attempt: attempt, ended: ended)
        let node = p.node
        let remaining = max(deadline - .now(), .milliseconds(1))
        let bootstrap = ClientBootstrap(group: loop)
            .connectTimeout(remaining)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    attempt.opened(channel)
                    let operations = channel.pipeline.syncOperations
                    try route.addHandlers(to: operations, host: host, port: node.port)
                    if let sslContext {
                        try operations.addHandler(route.tlsClientHandler(context: sslContext, host: node.tlsIdentity, serverName: node.tlsServerName))
                    }
                    let upgrade = DERPUpgradeHandler(hostHeader: node.hostHeader, webSocket: setup.transport.isWebSocket, attempt: attempt)
                    try operations.addHandler(upgrade)
                    try operations.addHandler(DERPConnectionHandler(setup))
                }
            }
        let result: DERPConnection
        do {
            result = try await withTaskCancellationHandler {
                do {
                    let destination = route.connectAddress(host: host, port: node.port)
                    _ = try await bootstrap.connect(host: destination.host, port: destination.port).get()
                } catch {
                    let via = route.proxy.map { " through proxy \($0)" } ?? ""
                    attempt.fail(.failed("connect to \(host):\(node.port)\(via): \(error)"))
                }
                return try await attempt.future.get()
            } onCancel: {
                attempt.fail(.failed("cancelled"))
            }
        } catch let error as DERPConnectError {
            timer.cancel()
            ended.succeed(DERPConnectionEnd(error: error.description))
            throw error
        } catch {
            timer.cancel()
            ended.succeed(DERPConnectionEnd(error: "\(error)"))
            throw .failed("\(error)")
        }
        timer.cancel()
        return result
    }

    /// The TLS context for a relay, the same on every route; `insecure` (tests' relays)
    /// verifies nothing.
    static func makeSSLContext(insecure: Bool, deadline: NIODeadline) async throws -> TLSContext {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.applicationProtocols = ["http/1.1"]
        if insecure { configuration.certificateVerification = .none }
        return try await TLSContextCache.shared.context(for: configuration, deadline: deadline)
    }
}
