/// Why a packet was dropped.
public enum WireGuardDropReason: Int, CaseIterable, Sendable, CustomStringConvertible {
    /// A transport message for an index with no session (unknown, expired or zeroed).
    case noSession
    /// A transport counter seen before or too far behind the window.
    case replay
    /// A handshake message whose mac1 is wrong.
    case badMAC
    /// A decrypted packet whose source is not among the sending peer's allowed IPs.
    case sourceNotAllowed
    /// The oldest packet waiting for a handshake, dropped to make room.
    case queueFull
    /// A handshake initiation from a static key that is no peer.
    case unknownKey
    /// Bytes that are no WireGuard message (or no IP packet, inside or outbound).
    case malformed
    /// An outbound packet whose destination no peer's allowed IPs hold.
    case noRoute
    /// A transport message whose authentication tag is wrong.
    case authenticationFailed
    /// A handshake message that failed (see the handshake failure counters).
    case handshakeFailed
    /// Packets waiting for a handshake that never completed (retries ran out, keys zeroed).
    case handshakeTimeout
    /// A handshake initiation beyond the device's budget (``HandshakeBudget``), dropped
    /// before its Diffie-Hellman is computed.
    case handshakeRateLimited

    /// The metric label (snake case).
    public var description: String {
        switch self {
        case .noSession: "no_session"
        case .replay: "replay"
        case .badMAC: "bad_mac"
        case .sourceNotAllowed: "source_not_allowed"
        case .queueFull: "queue_full"
        case .unknownKey: "unknown_key"
        case .malformed: "malformed"
        case .noRoute: "no_route"
        case .authenticationFailed: "authentication_failed"
        case .handshakeFailed: "handshake_failed"
        case .handshakeTimeout: "handshake_timeout"
        case .handshakeRateLimited: "handshake_rate_limited"
        }
    }
}
