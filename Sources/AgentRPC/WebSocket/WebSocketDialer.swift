import Logging
import NIOCore
import NIOPosix
import Yamux

/// Dials `GET /api/v2/workspaceagents/me/rpc?version=…&role=agent` as a WebSocket with
/// `Coder-Session-Token`, binary messages up to 4 MiB, no subprotocol, no compression, no
/// `Origin`; `wss://` uses the system trust store.
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
