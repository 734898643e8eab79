/// What a ``DERPClient`` is doing, for the owner to observe.
public struct DERPClientState: Equatable, Sendable {
    /// Where the connection stands.
    public enum Phase: Equatable, Sendable {
        /// Not started.
        case idle
        /// Dialing, or waiting to redial.
        case connecting
        /// The handshake finished; packets flow.
        case connected
        /// ``DERPClient/close()`` was called.
        case closed
    }

    /// Idle, connecting, connected or closed.
    public var phase: Phase = .idle
    /// The node of the current (or last) connection.
    public var node: DERPNode?
    /// The transport of the current (or last) connection, and why WebSocket if so.
    public var transport: DERPTransport?
    /// Why the last connection or attempt ended; nil before the first failure.
    public var lastError: String?
    /// The server's last Health text; nil when healthy.
    public var health: String?
    /// The relay's public key once the handshake finished.
    public var serverKey: X25519PublicKey?

    /// The state of a client not yet started.
    public init() {}
}
