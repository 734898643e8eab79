import NIOCore
import NIOPosix
import NIOSSL

/// Dials one DERP connection: TCP to the node's addresses in order,
/// TLS with ALPN `http/1.1` unless `force_http`, then `Upgrade: DERP` or a WebSocket
/// with subprotocol `derp`, then the DERP handshake — all within one deadline.
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
    }

    /// Connects, trying the node's addresses in order until one finishes the handshake;
    /// an HTTP refusal ends the attempt at once (it is the server's answer, not the path's).
    static func connect(_ parameters: Parameters, group: any EventLoopGroup) async throws(DERPConnectError) -> DERPConnection {
        let hosts = parameters.node.dialHosts
        guard !hosts.isEmpty else { throw .noAddress }
        let deadline = NIODeadline.now() + parameters.connectTimeout
        var lastError = DERPConnectError.noAddress
        // Bounded: at most two addresses (the IPv4 and IPv6 overrides) or one name.
        for host in hosts {
            guard NIODeadline.now() < deadline else { throw .timedOut }
            do {
                return try await connectOnce(parameters, host: host, deadline: deadline, group: group)
            } catch {
                if case .refused = error { throw error }
                if case .negotiatedHTTP2 = error { throw error }
                lastError = error
            }
        }
        throw lastError
    }

    private static func connectOnce(
        _ p: Parameters, host: String, deadline: NIODeadline, group: any EventLoopGroup
    ) async throws(DERPConnectError) -> DERPConnection {
        let sslContext: NIOSSLContext?
        do {
            sslContext = p.node.forceHTTP ? nil : try makeSSLContext(insecure: p.node.insecureForTests)
        } catch {
            throw .failed("TLS setup: \(error)")
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
                    if let sslContext {
                        try operations.addHandler(NIOSSLClientHandler(context: sslContext, serverHostname: node.tlsServerName))
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
                    _ = try await bootstrap.connect(host: host, port: node.port).get()
                } catch {
                    attempt.fail(.failed("connect to \(host):\(node.port): \(error)"))
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

    static func makeSSLContext(insecure: Bool) throws -> NIOSSLContext {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.applicationProtocols = ["http/1.1"]
        if insecure { configuration.certificateVerification = .none }
        return try NIOSSLContext(configuration: configuration)
    }
}
