import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOWebSocket
import Synchronization
import Yamux

/// Opens the connection the upward RPC runs over and returns a yamux client session on it.
/// The session ends (``YamuxSession/waitClosed()`` returns) when the connection does.
public protocol ControlPlaneDialer: Sendable {
    func dial() async throws -> YamuxSession
}

/// Why a dial failed before the WebSocket was up.
public enum DialError: Error, Equatable, CustomStringConvertible {
    case invalidURL(String)
    /// The control plane answered the upgrade with an HTTP status (coderd: 400 bad
    /// version, 401 bad token), with the `message` of its JSON body when there is one.
    case refused(status: Int, message: String)
    case timedOut

    public var description: String {
        switch self {
        case .invalidURL(let url): return "invalid control plane URL \(url)"
        case .refused(let status, let message): return "control plane refused the connection: HTTP \(status)\(message.isEmpty ? "" : ": " + message)"
        case .timedOut: return "control plane did not answer the WebSocket upgrade in time"
        }
    }
}

/// Dials `GET /api/v2/workspaceagents/me/rpc?version=…&role=agent` as a WebSocket with
/// `Coder-Session-Token`, binary messages up to 4 MiB, no subprotocol, no compression, no
/// `Origin` (spec agent-rpc §3.1); `wss://` uses the system trust store.
///
/// Built directly on SwiftNIO: the yamux session runs on the connection's event loop, so
/// received bytes reach it without a thread hop.
public struct WebSocketDialer: ControlPlaneDialer {
    /// Largest WebSocket frame accepted: 4 MiB.
    public static let maxMessageSize = 4 << 20
    /// Connect plus upgrade must finish within this.
    public static let dialTimeout: TimeAmount = .seconds(30)

    public let url: String
    private let token: String
    private let logger: Logger
    private let group: any EventLoopGroup

    /// - Parameters:
    ///   - baseURL: the control plane's access URL, e.g. `https://coder.example.com`.
    ///   - token: the agent token (never logged).
    ///   - version: the API version requested (`major.minor`).
    public init(baseURL: String, token: String, version: String, logger: Logger,
                group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) {
        var base = baseURL
        while base.hasSuffix("/") { base.removeLast() }
        if base.hasPrefix("https://") {
            base = "wss://" + base.dropFirst("https://".count)
        } else if base.hasPrefix("http://") {
            base = "ws://" + base.dropFirst("http://".count)
        }
        self.url = base + "/api/v2/workspaceagents/me/rpc?version=\(version)&role=agent"
        self.token = token
        self.logger = logger
        self.group = group
    }

    public func dial() async throws -> YamuxSession {
        try await WebSocketConnector.connect(
            url: url, headers: [("Coder-Session-Token", token)], group: group
        ) { channel in
            try YamuxSession.overWebSocket(channel, role: .client)
        }
    }
}

/// A WebSocket client handshake on SwiftNIO (ws and wss), handing the upgraded channel to
/// the caller's pipeline setup. A refused upgrade becomes ``DialError/refused(status:message:)``.
public enum WebSocketConnector {
    private enum Upgrade<T: Sendable>: Sendable {
        case upgraded(T)
        case refused(EventLoopFuture<DialError>)
    }

    /// - Parameters:
    ///   - url: `ws://` or `wss://` URL.
    ///   - headers: extra request headers (never logged).
    ///   - upgraded: called on the channel's loop once the frame codec is installed.
    public static func connect<T: Sendable>(
        url: String, headers extra: [(String, String)] = [],
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        timeout: TimeAmount = WebSocketDialer.dialTimeout,
        upgraded: @escaping @Sendable (any Channel) throws -> T
    ) async throws -> T {
        guard let parsed = URLComponents(string: url), let host = parsed.host, !host.isEmpty,
              let scheme = parsed.scheme, scheme == "ws" || scheme == "wss"
        else { throw DialError.invalidURL(url) }
        // `[::1]` in the URL and the Host header; `::1` to connect and for SNI checks.
        let address = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        let tls = scheme == "wss"
        let port = parsed.port ?? (tls ? 443 : 80)
        let path = (parsed.percentEncodedPath.isEmpty ? "/" : parsed.percentEncodedPath)
            + (parsed.percentEncodedQuery.map { "?" + $0 } ?? "")
        let sslContext = tls ? try NIOSSLContext(configuration: .makeClientConfiguration()) : nil
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: parsed.port.map { "\(host):\($0)" } ?? host)
        for (name, value) in extra { headers.add(name: name, value: value) }
        headers.add(name: "Content-Length", value: "0")
        let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: path, headers: headers)
        let expired = ExpiryFlag()

        let upgrade: EventLoopFuture<Upgrade<T>> = try await ClientBootstrap(group: group)
            .connectTimeout(timeout)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .connect(host: address, port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let sslContext {
                        // SNI carries names only; an address literal is verified without it.
                        let isAddress = (try? SocketAddress(ipAddress: address, port: 0)) != nil
                        try channel.pipeline.syncOperations.addHandler(
                            NIOSSLClientHandler(context: sslContext, serverHostname: isAddress ? nil : address))
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
                    // A server that accepts the connection but never answers must not hold
                    // the dial forever.
                    let timer = channel.eventLoop.scheduleTask(in: timeout) {
                        expired.set()
                        channel.close(promise: nil)
                    }
                    result.whenComplete { _ in timer.cancel() }
                    return result
                }
            }
        let result: Upgrade<T>
        do {
            result = try await upgrade.get()
        } catch {
            if expired.isSet { throw DialError.timedOut }
            throw error
        }
        switch result {
        case .upgraded(let value):
            return value
        case .refused(let refusal):
            throw try await refusal.get()
        }
    }
}

/// Set once the dial's deadline closed the connection.
private final class ExpiryFlag: Sendable {
    private let value = Mutex(false)
    func set() { value.withLock { $0 = true } }
    var isSet: Bool { value.withLock { $0 } }
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
        guard let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any],
              let message = object["message"] as? String
        else { return "" }
        return String(message.prefix(500))
    }
}
