/// How a DERP connection carries its byte stream.
public enum DERPTransport: Equatable, Sendable, CustomStringConvertible {
    /// `GET /derp` with `Upgrade: DERP`, then frames on the socket itself.
    case upgrade
    /// A WebSocket with subprotocol `derp`, frames inside binary messages. `reason` says
    /// why (the Node's `derp_forced_websocket`): forced by configuration, or the text of
    /// the refused Upgrade.
    case webSocket(reason: String)

    public var description: String {
        switch self {
        case .upgrade: "upgrade"
        case .webSocket(let reason): "websocket (\(reason))"
        }
    }

    /// True for ``webSocket(reason:)``.
    public var isWebSocket: Bool {
        if case .webSocket = self { return true }
        return false
    }
}
