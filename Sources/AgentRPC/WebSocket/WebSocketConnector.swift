import AgentCore
import AgentTLS
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket
import OutboundProxy
import Synchronization

/// A WebSocket client handshake on SwiftNIO (ws and wss), handing the upgraded channel to
/// the caller's pipeline setup. A refused upgrade becomes ``DialError/refused(status:message:)``.
/// Behind a proxy (`HTTP_PROXY` for ws, `HTTPS_PROXY` for wss, `NO_PROXY`, as Go chooses) the
/// connection is a `CONNECT` tunnel for either scheme, as RFC 6455 §4.1 asks of a client
/// (Go forwards ws:// as a plain request, which proxies do not upgrade).
public enum WebSocketConnector {
    private enum Upgrade<T: Sendable>: Sendable {
        case upgraded(T)
        case refused(EventLoopFuture<DialError>)
    }

    /// - Parameters:
    ///   - url: `ws://` or `wss://` URL.
    ///   - headers: extra request headers (never logged).
    ///   - proxies: where the proxy settings come from (the agent's environment).
    ///   - tlsConfiguration: for `wss://` (default: the system's trust store, full
    ///     verification; the identity is checked as Go checks it on every route, ``OutboundProxy/ProxyRoute``).
    ///   - upgraded: called on the channel's loop once the frame codec is installed.
    public static func connect<T: Sendable>(
        url: String, headers extra: [(String, String)] = [],
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, proxies: ProxyEnvironment = .process,
        tlsConfiguration: TLSConfiguration = .makeClientConfiguration(), timeout: TimeAmount = WebSocketDialer.dialTimeout,
        upgraded: @escaping @Sendable (any Channel) throws -> T
    ) async throws -> T {
        guard let parsed = URLComponents(string: url), let host = parsed.host, !host.isEmpty,
            let scheme = parsed.scheme, scheme == "ws" || scheme == "wss"
        else { throw DialError.invalidURL(url) }
        // `[::1]` in the URL and the Host header; `::1` to connect and for SNI checks.
        let address = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        let tls = scheme == "wss"
        let port = parsed.port ?? (tls ? 443 : 80)
        let path =
            (parsed.percentEncodedPath.isEmpty ? "/" : parsed.percentEncodedPath)
            + (parsed.percentEncodedQuery.map { "?" + $0 } ?? "")
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: parsed.port.map { "\(host):\($0)" } ?? host)
        for (name, value) in extra { headers.add(name: name, value: value) }
        headers.add(name: "Content-Length", value: "0")
        let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: path, headers: headers)
        // Any proxy Go's dialer takes (https://, SOCKS5 too).
        let route = try ProxyRoute.choose(scheme: scheme, host: address, port: port, environment: proxies, alwaysTunnel: true, anyProxyKind: true)
        let serverName = ProxyRoute.serverName(for: address)
        // The target's TLS (wss), and an https:// proxy's, with the same trust.
        let sslContext =
            tls || route.proxyTLS
            ? try await TLSContextCache.shared.context(for: tlsConfiguration, deadline: .now() + timeout)
            : nil
        let expired = OnceFlag()
        let cancellation = DialCancellation()
        return try await withTaskCancellationHandler {
            try await dial(
                address: address, port: port, route: route, timeout: timeout, tls: tls, sslContext: sslContext, serverName: serverName,
                head: head, expired: expired,
                cancellation: cancellation, group: group, upgraded: upgraded)
        } onCancel: {
            cancellation.cancel()
        }
    }

    private static func dial<T: Sendable>(
        address: String, port: Int, route: ProxyRoute, timeout: TimeAmount, tls: Bool, sslContext: TLSContext?, serverName: String?,
        head: HTTPRequestHead,
        expired: OnceFlag,
        cancellation: DialCancellation, group: any EventLoopGroup, upgraded: @escaping @Sendable (any Channel) throws -> T
    ) async throws -> T {
        if cancellation.isCancelled { throw CancellationError() }
        let destination = route.connectAddress(host: address, port: port)
        let upgrade: EventLoopFuture<Upgrade<T>> = try await ClientBootstrap(group: group)
            .connectTimeout(timeout)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .connect(host: destination.host, port: destination.port) { channel in
                cancellation.opened(channel)
                return channel.eventLoop.makeCompletedFuture {
                    // The proxy's tunnel first: TLS and the upgrade start inside it.
                    try route.addHandlers(to: channel.pipeline.syncOperations, host: address, port: port, proxyContext: sslContext)
                    if tls, let sslContext {
                        try channel.pipeline.syncOperations.addHandler(
                            route.tlsClientHandler(context: sslContext, host: address, serverName: serverName))
                    }
                    let upgrader = NIOTypedWebSocketClientUpgrader<Upgrade<T>>(
                        maxFrameSize: WebSocketDialer.maxMessageSize,
                        upgradePipelineHandler: { channel, _ in
                            channel.eventLoop.makeCompletedFuture { .upgraded(try upgraded(channel)) }
                        })
                    let configuration = NIOTypedHTTPClientUpgradeConfiguration<Upgrade<T>>(
                        upgradeRequestHead: head, upgraders: [upgrader],
                        notUpgradingCompletionHandler: { channel in
                            channel.eventLoop.makeCompletedFuture {
                                let promise = channel.eventLoop.makePromise(of: DialError.self)
                                try channel.pipeline.syncOperations.addHandler(RefusalReader(promise: promise))
                                return .refused(promise.futureResult)
                            }
                        })
                    let result = try channel.pipeline.syncOperations.configureUpgradableHTTPClientPipeline(
                        configuration: .init(upgradeConfiguration: configuration))
                    // A server that accepts the connection but never answers (or never
                    // finishes its refusal) must not hold the dial forever: the deadline
                    // stands until the upgrade is done or the refusal read.
                    let timer = channel.eventLoop.scheduleTask(in: timeout) {
                        expired.set()
                        channel.close(promise: nil)
                    }
                    result.whenSuccess { outcome in
                        switch outcome {
                        case .upgraded: timer.cancel()
                        case .refused(let read): read.whenComplete { _ in timer.cancel() }
                        }
                    }
                    return result
                }
            }
        let result: Upgrade<T>
        do {
            result = try await upgrade.get()
        } catch {
            // A failed upgrade (a 101 whose accept key or headers are wrong) leaves the
            // connection open and reading: closed here, or each dial kept a socket whose
            // bytes the HTTP decoder buffered without bound.
            cancellation.close()
            if expired.isSet { throw DialError.timedOut }
            if cancellation.isCancelled { throw CancellationError() }
            throw error
        }
        switch result {
        case .upgraded(let value):
            return value
        case .refused(let refusal):
            // Its head was read: the status stands even when the deadline cut its body.
            let refused = try await refusal.get()
            cancellation.close()
            throw refused
        }
    }
}

/// Set once the dial's deadline closed the connection.
/// The dial's channel, so that cancelling the dialing task (the agent's shutdown) closes
/// it at once instead of waiting for a server that never answers.
private final class DialCancellation: Sendable {
    private struct State {
        var channel: (any Channel)?
        var cancelled = false
    }
    private let state = Mutex(State())

    /// Records the channel; closes it at once if the dial was already cancelled.
    func opened(_ channel: any Channel) {
        let cancelled = state.withLock { s -> Bool in
            s.channel = channel
            return s.cancelled
        }
        if cancelled { channel.close(promise: nil) }
    }

    func cancel() {
        let channel = state.withLock { s -> (any Channel)? in
            s.cancelled = true
            return s.channel
        }
        channel?.close(promise: nil)
    }

    var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// Closes the channel (a dial that failed or was refused), if it was opened.
    func close() {
        state.withLock { $0.channel }?.close(promise: nil)
    }
}

/// Reads a refused upgrade's response (status and up to 64 KiB of body), then closes.
private final class RefusalReader: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    static let maxBody = 64 * 1024

    private let promise: EventLoopPromise<DialError>
    private var status = 0
    private var body: [UInt8] = []
    private var answered = false

    init(promise: EventLoopPromise<DialError>) {
        self.promise = promise
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            status = Int(head.status.code)
        case .body(let buffer):
            body += buffer.readableBytesView.prefix(max(0, Self.maxBody - body.count))
        case .end:
            answer()
            context.close(promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        answer()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        answer()
        context.close(promise: nil)
    }

    private func answer() {
        guard !answered else { return }
        answered = true
        promise.succeed(.refused(status: status, message: Self.message(in: body)))
    }

    /// coderd's error bodies are `{"message": …, "detail": …}`.
    static func message(in body: [UInt8]) -> String {
        guard let message = (try? JSONValue.parseFirst(body))?["message"]?.stringValue else { return "" }
        return String(message.prefix(500))
    }
}
