/// Counts of one ``DERPClient`` since it was made (also reported through swift-metrics by
/// ``DERPMetrics``).
public struct DERPClientStatistics: Equatable, Sendable {
    /// Connections that finished the handshake.
    public var connects = 0
    /// Of those, the ones after the first.
    public var reconnects = 0
    /// Frames written to the socket (packets, handshake, pongs).
    public var framesSent = 0
    /// Frames read from the relay.
    public var framesReceived = 0
    /// Their bytes, headers included.
    public var bytesSent = 0
    /// Their bytes, headers included.
    public var bytesReceived = 0
    /// Packets (or frames) dropped, by reason: `queue_full`, `not_connected`, `too_large`,
    /// `inbound_full`, `malformed_frame`, `unknown_frame`, `closed`, `pong_backlog` (a relay ping left
    /// unanswered while earlier answers wait to be written).
    public var drops: [String: Int] = [:]
    /// Outbound frames accepted but not yet written to the socket, now.
    public var queuedPackets = 0
    /// Their bytes, now.
    public var queuedBytes = 0
    /// The most bytes ever queued at once (never above the configured bound).
    public var peakQueuedBytes = 0

    /// All zero.
    public init() {}

    /// All drops, whatever the reason.
    public var totalDrops: Int { drops.values.reduce(0, +) }
}
