import AgentCore
import Logging
import NIOCore
import NIOPosix
import OutboundProxy
import Yamux

/// Dials `GET /api/v2/workspaceagents/me/rpc?version=…&role=agent` as a WebSocket with
/// `Coder-Session-Token` (asked of its token source on every dial) and the agent's extra
/// headers, binary messages up to 4 MiB, no subprotocol, no compression, no
/// `Origin`; `wss://` uses the system trust store. Behind a proxy it tunnels through it
/// (``WebSocketConnector``).
//
// Versions: it asks for `version` first; when the control plane answers 400 `Unknown or
// unsupported API version` (an older coderd), it asks for each of `fallbackVersions` in turn,
// at once, and the connection says which one was accepted. Every dial starts again with
// `version`, so an upgraded control plane is used at the next reconnect.
///
/// Built directly on SwiftNIO: the yamux session runs on the connection's event loop, so
/// received bytes reach it without a thread hop.
public struct WebSocketDialer: ControlPlaneDialer {
    /// Largest WebSocket frame accepted: 4 MiB.
    public static let maxMessageSize = 4 << 20
    /// Connect plus upgrade must finish within this.
    public static let dialTimeout: TimeAmount = .seconds(30)
    /// coderd's message for a version it does not serve (HTTP 400).
    public static let unsupportedVersionMessage = "Unknown or unsupported API version"

    /// The URL of the first version asked for.
    public var url: String { address(version) }
    private let endpoint: String
    private let version: String
    private let fallbackVersions: [String]
    private let tokenSource: any SessionTokenSource
    private let headers: [(String, String)]
    private let logger: Logger
    private let group: any EventLoopGroup
    private let proxies: ProxyEnvironment

    /// A dialer with a fixed token (never logged).
    public init(
        baseURL: String, token: String, version: String, fallbackVersions: [String] = [], logger: Logger,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, proxies: ProxyEnvironment = .process
    ) {
        self.init(
            baseURL: baseURL, tokenSource: FixedSessionToken(token), version: version, fallbackVersions: fallbackVersions,
            logger: logger, group: group, proxies: proxies)
    }

    /// - Parameters:
    ///   - baseURL: the control plane's access URL, e.g. `https://coder.example.com`.
    ///   - tokenSource: asked for the token before each dial; its failure fails the dial.
    ///   - headers: added to the upgrade request after the token (never logged).
    ///   - version: the API version requested (`major.minor`).
    ///   - fallbackVersions: asked for in order when the control plane refuses the one before.
    ///   - proxies: the proxy settings (the agent's environment).
    public init(
        baseURL: String, tokenSource: any SessionTokenSource, headers: [(String, String)] = [], version: String,
        fallbackVersions: [String] = [], logger: Logger, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        proxies: ProxyEnvironment = .process
    ) {
        let credentials = AccessURLCredentials(baseURL)
        var base = credentials.url
        while base.hasSuffix("/") { base.removeLast() }
        if base.hasPrefix("https://") {
            base = "wss://" + base.dropFirst("https://".count)
        } else if base.hasPrefix("http://") {
            base = "ws://" + base.dropFirst("http://".count)
        }
        self.endpoint = base + "/api/v2/workspaceagents/me/rpc"
        self.version = version
        self.fallbackVersions = fallbackVersions
        self.tokenSource = tokenSource
        self.headers = credentials.adding(to: headers)
        self.logger = logger
        self.group = group
        self.proxies = proxies
    }

    public func dial() async throws -> YamuxSession {
        try await connect().session
    }

    public func connect() async throws -> ControlPlaneConnection {
        let token: String
        do {
            token = try await tokenSource.sessionToken()
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            // The reference's words in its connection loop.
            throw TokenRefreshError(reason: "\(error)")
        }
        var versions = [version] + fallbackVersions
        while true {
            let asked = versions.removeFirst()
            do {
                let session = try await WebSocketConnector.connect(
                    url: address(asked), headers: [("Coder-Session-Token", token)] + headers, group: group, proxies: proxies
                ) { channel in
                    try YamuxSession.overWebSocket(channel, role: .client)
                }
                return ControlPlaneConnection(session: session, version: Self.parse(asked) ?? .current, token: token)
            } catch DialError.refused(status: 400, message: Self.unsupportedVersionMessage) where !versions.isEmpty {
                logger.info(
                    "control plane does not serve this Agent API version; asking for an older one",
                    metadata: ["version": "\(asked)", "next": "\(versions[0])"])
            }
        }
    }

    private func address(_ version: String) -> String { endpoint + "?version=\(version)&role=agent" }

    /// `major.minor` as a version; nil for anything else.
    static func parse(_ text: String) -> AgentAPIVersion? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, let major = Int(parts[0]), let minor = Int(parts[1]) else { return nil }
        return AgentAPIVersion(major, minor)
    }
}

/// The token source failed before a dial: an ordinary connection failure (the session's back-off).
public struct TokenRefreshError: Error, CustomStringConvertible {
    public var reason: String
    public var description: String { "refresh token: \(reason)" }
}
