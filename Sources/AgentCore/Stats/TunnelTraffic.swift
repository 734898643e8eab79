import Synchronization

/// The tunnel's traffic per IP flow (protocol, source, destination) since the last report:
/// the tailnet records every packet it delivers or sends, the stats report takes the window.
/// This is what `UpdateStats` may honestly call connections: a flow that really crossed the
/// tunnel (an invented one would keep an idle workspace alive).
///
/// Memory: at most ``maxFlows`` flows per window (tailscale's connstats bound, 2048); the
/// traffic of further flows is still added to the totals, only not as a flow of its own.
public final class TunnelTraffic: Sendable {
    public static let maxFlows = 2048

    /// One direction's packets and bytes.
    public struct Counts: Sendable, Equatable {
        public var packets: Int64 = 0
        public var bytes: Int64 = 0
        public init(packets: Int64 = 0, bytes: Int64 = 0) {
            self.packets = packets
            self.bytes = bytes
        }
    }

    /// A flow's key: the IP protocol number and both ends (an IPv6 address as two 64-bit
    /// halves, an IPv4 one in the low half, and the port; no allocation per packet).
    public struct Flow: Hashable, Sendable {
        public var ipProtocol: UInt8
        public var sourceHigh: UInt64
        public var sourceLow: UInt64
        public var sourcePort: UInt16
        public var destinationHigh: UInt64
        public var destinationLow: UInt64
        public var destinationPort: UInt16

        public init(
            ipProtocol: UInt8, sourceHigh: UInt64, sourceLow: UInt64, sourcePort: UInt16,
            destinationHigh: UInt64, destinationLow: UInt64, destinationPort: UInt16
        ) {
            self.ipProtocol = ipProtocol
            self.sourceHigh = sourceHigh
            self.sourceLow = sourceLow
            self.sourcePort = sourcePort
            self.destinationHigh = destinationHigh
            self.destinationLow = destinationLow
            self.destinationPort = destinationPort
        }
    }

    /// What crossed the tunnel in one window.
    public struct Window: Sendable, Equatable {
        /// Distinct flows per protocol name (`tcp`, `udp`, `icmp`, `other`).
        public var flowsByProtocol: [String: Int64] = [:]
        public var flows: Int64 { flowsByProtocol.values.reduce(0, +) }
        /// Into the workspace.
        public var received = Counts()
        /// Out of the workspace.
        public var sent = Counts()
        public init() {}
    }

    private struct State {
        var flows: [Flow: UInt8] = [:]
        var received = Counts()
        var sent = Counts()
    }
    private let state = Mutex(State())

    public init() {}

    /// Records one packet of `bytes` bytes on `flow`; `inbound` when it came into the workspace.
    public func record(_ flow: Flow, bytes: Int, inbound: Bool) {
        state.withLock { s in
            if inbound {
                s.received.packets += 1
                s.received.bytes += Int64(bytes)
            } else {
                s.sent.packets += 1
                s.sent.bytes += Int64(bytes)
            }
            if s.flows.count < Self.maxFlows, s.flows[flow] == nil { s.flows[flow] = flow.ipProtocol }
        }
    }

    /// Records one IP packet (IPv4 or IPv6; TCP and UDP flows keyed by port too). A packet
    /// too short for its header counts as traffic of an `other` flow with no addresses.
    public func record(packet: UnsafeRawBufferPointer, inbound: Bool) {
        record(Self.flow(of: packet), bytes: packet.count, inbound: inbound)
    }

    /// The flow an IP packet belongs to (reads only the fixed headers, bounds-checked).
    public static func flow(of packet: UnsafeRawBufferPointer) -> Flow {
        var flow = Flow(ipProtocol: 0, sourceHigh: 0, sourceLow: 0, sourcePort: 0, destinationHigh: 0, destinationLow: 0, destinationPort: 0)
        func u64(_ at: Int) -> UInt64 {
            var v: UInt64 = 0
            for i in 0..<8 { v = v << 8 | UInt64(packet[at + i]) }
            return v
        }
        func u32(_ at: Int) -> UInt64 {
            var v: UInt64 = 0
            for i in 0..<4 { v = v << 8 | UInt64(packet[at + i]) }
            return v
        }
        guard let first = packet.first else { return flow }
        var transport = 0
        switch first >> 4 {
        case 6 where packet.count >= 40:
            flow.ipProtocol = packet[6]
            flow.sourceHigh = u64(8)
            flow.sourceLow = u64(16)
            flow.destinationHigh = u64(24)
            flow.destinationLow = u64(32)
            transport = 40
        case 4 where packet.count >= 20:
            flow.ipProtocol = packet[9]
            flow.sourceLow = u32(12)
            flow.destinationLow = u32(16)
            transport = Int(first & 0x0F) * 4
        default:
            return flow
        }
        if flow.ipProtocol == 6 || flow.ipProtocol == 17, transport >= 20, packet.count >= transport + 4 {
            flow.sourcePort = UInt16(packet[transport]) << 8 | UInt16(packet[transport + 1])
            flow.destinationPort = UInt16(packet[transport + 2]) << 8 | UInt16(packet[transport + 3])
        }
        return flow
    }

    /// The window since the last call; starts a new one.
    public func takeWindow() -> Window {
        state.withLock { s in
            var window = Window()
            for ipProtocol in s.flows.values {
                window.flowsByProtocol[Self.protocolName(ipProtocol), default: 0] += 1
            }
            window.received = s.received
            window.sent = s.sent
            s = State()
            return window
        }
    }

    /// The name `connections_by_proto` uses for an IP protocol number.
    public static func protocolName(_ ipProtocol: UInt8) -> String {
        switch ipProtocol {
        case 6: "tcp"
        case 17: "udp"
        case 1, 58: "icmp"
        default: "other"
        }
    }
}
