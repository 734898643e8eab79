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
