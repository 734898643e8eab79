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
        }
    }
}

/// Why a received handshake message was refused.
public enum WireGuardHandshakeFailure: Int, CaseIterable, Sendable, CustomStringConvertible {
    /// An AEAD field did not open (wrong keys, corrupted message).
    case decryption
    /// A timestamp not newer than the last initiation from that peer.
    case replayedTimestamp
    /// An initiation within 20 ms of the last one from that peer.
    case flood
    /// A response or cookie reply for no initiation of ours in progress.
    case unexpected
    /// A key exchange with a low-order point.
    case badPoint

    /// The metric label (snake case).
    public var description: String {
        switch self {
        case .decryption: "decryption"
        case .replayedTimestamp: "replayed_timestamp"
        case .flood: "flood"
        case .unexpected: "unexpected"
        case .badPoint: "bad_point"
        }
    }
}

/// The device's counters, a snapshot the owner reads (e.g. to feed swift-metrics). Plain
/// fixed storage: counting never allocates.
public struct WireGuardCounters: Sendable, Equatable {
    private var dropCounts = [UInt64](repeating: 0, count: WireGuardDropReason.allCases.count)
    private var failureCounts = [UInt64](repeating: 0, count: WireGuardHandshakeFailure.allCases.count)
    /// Initiations sent (first tries and retries).
    public var initiationsSent: UInt64 = 0
    /// Initiations answered (responder role).
    public var initiationsAnswered: UInt64 = 0
    /// Responses consumed: sessions established as initiator.
    public var handshakesCompletedAsInitiator: UInt64 = 0
    /// Sessions confirmed as responder (the initiator's first transport message arrived).
    public var handshakesConfirmedAsResponder: UInt64 = 0
    /// Cookie replies accepted.
    public var cookieRepliesAccepted: UInt64 = 0
    /// Transport messages sent (keepalives included).
    public var transportPacketsSent: UInt64 = 0
    /// Bytes of the transport messages sent, on the wire.
    public var transportBytesSent: UInt64 = 0
    /// Transport messages received and authenticated.
    public var transportPacketsReceived: UInt64 = 0
    /// Bytes of the transport messages received and authenticated, on the wire.
    public var transportBytesReceived: UInt64 = 0
    /// IP packets given to the local stack.
    public var packetsDelivered: UInt64 = 0
    /// Bytes of the IP packets given to the local stack.
    public var bytesDelivered: UInt64 = 0
    /// Keepalives sent.
    public var keepalivesSent: UInt64 = 0
    /// Keepalives received.
    public var keepalivesReceived: UInt64 = 0

    /// Creates zeroed counters.
    public init() {}

    /// Packets dropped for `reason`.
    public func drops(_ reason: WireGuardDropReason) -> UInt64 { dropCounts[reason.rawValue] }
    /// Received handshake messages refused for `reason`.
    public func handshakeFailures(_ reason: WireGuardHandshakeFailure) -> UInt64 { failureCounts[reason.rawValue] }
    /// All drops.
    public var totalDrops: UInt64 { dropCounts.reduce(0, &+) }

    mutating func drop(_ reason: WireGuardDropReason) { dropCounts[reason.rawValue] &+= 1 }
    mutating func fail(_ reason: WireGuardHandshakeFailure) {
        failureCounts[reason.rawValue] &+= 1
        dropCounts[WireGuardDropReason.handshakeFailed.rawValue] &+= 1
    }
}
