import Synchronization

/// A snapshot of a ``TunnelStack``'s counters, for the owner's metrics. Counts are since the
/// stack started; `openConnections` and `halfOpenConnections` are current.
public struct TunnelStackCounters: Sendable, Equatable {
    /// Tunnel connections handed to the HTTP handler or a forward and not yet ended.
    public var openConnections: Int = 0
    /// Handshakes in progress (including forwards still connecting locally).
    public var halfOpenConnections: Int = 0
    /// Connections accepted (handshake completed and handed on), all ports.
    public var accepted: UInt64 = 0
    /// Of those, forwarded to 127.0.0.1.
    public var forwarded: UInt64 = 0
    /// SYNs reset because the port is reserved (0–8 other than the HTTP port).
    public var refusedReservedPort: UInt64 = 0
    /// SYNs reset because nothing listens on 127.0.0.1:<port>.
    public var refusedNoListener: UInt64 = 0
    /// SYNs reset because the local connect took longer than the connect timeout.
    public var refusedConnectTimeout: UInt64 = 0
    /// SYNs reset because the connection bound was reached.
    public var refusedConnectionLimit: UInt64 = 0
    /// SYNs reset for other reasons (no HTTP handler, forwarding off, local failures).
    public var refusedOther: UInt64 = 0
    /// SYNs dropped because the half-open bound was reached.
    public var droppedHalfOpenLimit: UInt64 = 0
    /// Handshakes abandoned after the handshake timeout.
    public var handshakeTimeouts: UInt64 = 0
    /// TIME_WAIT connections ended early by a newer SYN on their 4-tuple (a peer reusing its
    /// port after the workspace closed first).
    public var timeWaitReused: UInt64 = 0
    /// SYNs on an open connection's 4-tuple answered with a challenge ACK (RFC 5961 4.2): a
    /// peer that restarted resets the old connection with its answer, then connects anew.
    public var challengeAcks: UInt64 = 0
    /// SYNs on an open connection dropped unanswered: its last challenge ACK was less than
    /// ``TunnelStackConfiguration/challengeAckInterval`` ago.
    public var challengeAcksLimited: UInt64 = 0
    /// Connections reset after the idle timeout.
    public var idleTimeouts: UInt64 = 0
    /// Half-closed connections closed after the half-closed timeout.
    public var halfClosedTimeouts: UInt64 = 0
    /// Payload bytes from tunnel peers to local sockets, and back.
    public var bytesFromTunnel: UInt64 = 0
    public var bytesToTunnel: UInt64 = 0
    /// IPv6 packets in (all), out, and dropped before lwIP (not ours, IPv4, unsupported,
    /// malformed, outside the window, over the bounds).
    public var packetsIn: UInt64 = 0
    public var packetsOut: UInt64 = 0
    public var packetsDropped: UInt64 = 0
    /// Times a connection's out-of-order segments went over their bound and were dropped.
    public var outOfOrderPurges: UInt64 = 0
    /// UDP flows with a local socket now, and opened since the start.
    public var udpFlowsOpen: Int = 0
    public var udpFlowsOpened: UInt64 = 0
    /// UDP datagrams dropped because they would have opened a flow beyond the bound.
    public var udpFlowsRefused: UInt64 = 0
    /// UDP flows ended after their idle timeout.
    public var udpIdleTimeouts: UInt64 = 0
    /// UDP datagrams from tunnel peers taken by a flow, and datagrams sent back to them.
    public var udpDatagramsIn: UInt64 = 0
    public var udpDatagramsOut: UInt64 = 0
    /// UDP datagrams dropped: malformed (length field, checksum), forwarding off, port 0,
    /// over a flow's queue or write buffer, or too large for the MTU on the way back.
    public var udpDatagramsDropped: UInt64 = 0

    public init() {}
}

/// The live counters behind ``TunnelStackCounters`` (updated from lwIP's callbacks and the
/// event loops without a lock).
final class TunnelCounters: Sendable {
    let openConnections = Atomic<Int>(0)
    let accepted = Atomic<UInt64>(0)
    let forwarded = Atomic<UInt64>(0)
    let refusedReservedPort = Atomic<UInt64>(0)
    let refusedNoListener = Atomic<UInt64>(0)
    let refusedConnectTimeout = Atomic<UInt64>(0)
    let refusedConnectionLimit = Atomic<UInt64>(0)
    let refusedOther = Atomic<UInt64>(0)
    let droppedHalfOpenLimit = Atomic<UInt64>(0)
    let handshakeTimeouts = Atomic<UInt64>(0)
    let timeWaitReused = Atomic<UInt64>(0)
    let challengeAcks = Atomic<UInt64>(0)
    let challengeAcksLimited = Atomic<UInt64>(0)
    let idleTimeouts = Atomic<UInt64>(0)
    let halfClosedTimeouts = Atomic<UInt64>(0)
    let bytesFromTunnel = Atomic<UInt64>(0)
    let bytesToTunnel = Atomic<UInt64>(0)
    let packetsIn = Atomic<UInt64>(0)
    let packetsOut = Atomic<UInt64>(0)
    let packetsDropped = Atomic<UInt64>(0)
    let outOfOrderPurges = Atomic<UInt64>(0)
    let udpFlowsOpen = Atomic<Int>(0)
    let udpFlowsOpened = Atomic<UInt64>(0)
    let udpFlowsRefused = Atomic<UInt64>(0)
    let udpIdleTimeouts = Atomic<UInt64>(0)
    let udpDatagramsIn = Atomic<UInt64>(0)
    let udpDatagramsOut = Atomic<UInt64>(0)
    let udpDatagramsDropped = Atomic<UInt64>(0)

    func snapshot(halfOpen: Int) -> TunnelStackCounters {
        var counters = TunnelStackCounters()
        counters.openConnections = openConnections.load(ordering: .relaxed)
        counters.halfOpenConnections = halfOpen
        counters.accepted = accepted.load(ordering: .relaxed)
        counters.forwarded = forwarded.load(ordering: .relaxed)
        counters.refusedReservedPort = refusedReservedPort.load(ordering: .relaxed)
        counters.refusedNoListener = refusedNoListener.load(ordering: .relaxed)
        counters.refusedConnectTimeout = refusedConnectTimeout.load(ordering: .relaxed)
        counters.refusedConnectionLimit = refusedConnectionLimit.load(ordering: .relaxed)
        counters.refusedOther = refusedOther.load(ordering: .relaxed)
        counters.droppedHalfOpenLimit = droppedHalfOpenLimit.load(ordering: .relaxed)
        counters.handshakeTimeouts = handshakeTimeouts.load(ordering: .relaxed)
        counters.timeWaitReused = timeWaitReused.load(ordering: .relaxed)
        counters.challengeAcks = challengeAcks.load(ordering: .relaxed)
        counters.challengeAcksLimited = challengeAcksLimited.load(ordering: .relaxed)
        counters.idleTimeouts = idleTimeouts.load(ordering: .relaxed)
        counters.halfClosedTimeouts = halfClosedTimeouts.load(ordering: .relaxed)
        counters.bytesFromTunnel = bytesFromTunnel.load(ordering: .relaxed)
        counters.bytesToTunnel = bytesToTunnel.load(ordering: .relaxed)
        counters.packetsIn = packetsIn.load(ordering: .relaxed)
        counters.packetsOut = packetsOut.load(ordering: .relaxed)
        counters.packetsDropped = packetsDropped.load(ordering: .relaxed)
        counters.outOfOrderPurges = outOfOrderPurges.load(ordering: .relaxed)
        counters.udpFlowsOpen = udpFlowsOpen.load(ordering: .relaxed)
        counters.udpFlowsOpened = udpFlowsOpened.load(ordering: .relaxed)
        counters.udpFlowsRefused = udpFlowsRefused.load(ordering: .relaxed)
        counters.udpIdleTimeouts = udpIdleTimeouts.load(ordering: .relaxed)
        counters.udpDatagramsIn = udpDatagramsIn.load(ordering: .relaxed)
        counters.udpDatagramsOut = udpDatagramsOut.load(ordering: .relaxed)
        counters.udpDatagramsDropped = udpDatagramsDropped.load(ordering: .relaxed)
        return counters
    }
}

extension Atomic where Value == UInt64 {
    func increment(by amount: UInt64 = 1) {
        wrappingAdd(amount, ordering: .relaxed)
    }
}
