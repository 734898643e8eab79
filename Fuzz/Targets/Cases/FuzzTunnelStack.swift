import NIOCore
import Synchronization
import TunnelStack

/// The tunnel's TCP/IPv6 stack (lwIP behind TunnelStack's filter): packets from a tunnel
/// peer, raw bytes or built from fields with correct checksums (SYNs, data, FINs, RSTs with
/// sequence numbers near what the stack sent, options, echo requests, UDP datagrams with
/// whole or broken length fields), to the HTTP port, a reserved port and others. (Forwarding
/// to the loopback is off, so UDP goes through the stack's parsing and checks but opens no
/// local socket: an input stays a pure function of its bytes.) Every packet the stack sends must be a whole IPv6 packet of at
/// most the MTU from one of its addresses with a correct checksum; SYN-ACKs announce an MSS
/// of at most 1220; half-open and open connections stay within their bounds; nothing traps
/// (lwIP aborts the process on a failed assertion).
public func fuzzTunnelStack(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let sent = Sent()
    var configuration = TunnelStackConfiguration()
    configuration.maxHalfOpen = 4
    configuration.maxConnections = 8
    configuration.forwardToLoopback = false
    let stack: TunnelStack
    do {
        stack = try TunnelStack(
            addresses: addresses, configuration: configuration, output: { sent.append(Array($0)) })
    } catch {
        require(false, "the stack did not start: \(error)")
        return 0
    }
    var steps = 0
    while !input.isEmpty, steps < 64 {
        steps += 1
        let next = packet(&input, sent: sent)
        // Fed on lwIP's loop and waited for: what the stack answers is sent by then.
        let counters = try? stack.eventLoop.submit { () -> TunnelStackCounters in
            stack.input(next)
            return stack.counters()
        }.wait()
        for packet in sent.take() {
            check(packet, mtu: configuration.mtu)
        }
        guard let counters else { break }
        require(counters.halfOpenConnections <= configuration.maxHalfOpen, "half-open \(counters.halfOpenConnections)")
        require(counters.openConnections <= configuration.maxConnections, "open \(counters.openConnections)")
    }
    runBlocking { await stack.shutdown() }
    return 0
}

private let peers = [TunnelAddress("fd7a:115c:a1e0::1")!, TunnelAddress("fd7a:115c:a1e0:ab12::77")!]
private let addresses = [TunnelAddress("fd7a:115c:a1e0:def0:1234:5678:9abc:def0")!, TunnelAddress("fd60:627a:a42b:def0:1234:5678:9abc:def0")!]

/// What the stack sent, and the last sequence number it used toward each peer port.
private final class Sent: Sendable {
    private let state = Mutex<(packets: [[UInt8]], sequence: [UInt16: UInt32])>(([], [:]))

    func append(_ packet: [UInt8]) {
        state.withLock { state in
            state.packets.append(packet)
            if packet.count >= 60, packet[6] == 6 {
                let port = UInt16(packet[42]) << 8 | UInt16(packet[43])
                state.sequence[port] = packet[44..<48].reduce(0) { $0 << 8 | UInt32($1) }
            }
        }
    }

    func take() -> [[UInt8]] {
        state.withLock { state in
            defer { state.packets = [] }
            return state.packets
        }
    }

    func sequence(toward port: UInt16) -> UInt32 {
        state.withLock { $0.sequence[port] ?? 0 }
    }
}

private func check(_ packet: [UInt8], mtu: Int) {
    require(packet.count >= 40 && packet.count <= mtu, "a packet of \(packet.count) bytes")
    require(packet[0] >> 4 == 6, "not IPv6")
    require(Int(packet[4]) << 8 | Int(packet[5]) == packet.count - 40, "payload length")
    require(addresses.map(\.bytes).contains(Array(packet[8..<24])), "from an address not the stack's")
    require(TunnelStackFuzzing.checksumValid(packet), "bad checksum")
    if let mss = TunnelStackFuzzing.synMSS(packet) {
        require(mss <= 1220, "SYN-ACK announced MSS \(mss)")
    }
}

/// One packet from the input: raw bytes now and then, mostly TCP built from fields.
private func packet(_ input: inout FuzzInput, sent: Sent) -> [UInt8] {
    let kind = input.byte() % 8
    if kind == 0 { return input.data(maxLength: 1400) }
    let source = peers[Int(input.byte() % 2)]
    let destination = input.byte() % 8 == 0 ? TunnelAddress("fd7a:115c:a1e0::5")! : addresses[Int(input.byte() % 2)]
    var header: [UInt8] = [0x60, 0, 0, 0, 0, 0, 6, 64] + source.bytes + destination.bytes
    if kind == 1 {
        header[6] = 58
        let icmp: [UInt8] = [input.bool() ? 128 : input.byte(), 0, 0, 0] + input.data(maxLength: 64)
        return TunnelStackFuzzing.sealed(header + icmp)
    }
    if kind == 2 {
        header[6] = 17
        let ports: [UInt16] = [40000 + UInt16(input.byte() % 4), [53, 9, 0, 4][Int(input.byte() % 4)]]
        let udp = ports.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] } + [0, 0, 0, 0] + input.data(maxLength: 1240)
        // Sealed sets the length field to the datagram's size; sometimes it is broken after.
        var packet = TunnelStackFuzzing.sealed(header + udp)
        if input.byte() % 4 == 0 { (packet[44], packet[45]) = (input.byte(), input.byte()) }
        return packet
    }
    let sourcePort = UInt16(40000 + Int(input.byte() % 4))
    let destinationPort: UInt16 = [4, 4, 4, 5, 9, 0, 80, 4][Int(input.byte() % 8)]
    // Sequence numbers near the peer's own (1000 per port) and acknowledgments near what
    // the stack last sent, so that segments land inside windows.
    let sequence = UInt32(sourcePort) &* 1000 &+ UInt32(input.uint(2))
    let acknowledgment = sent.sequence(toward: sourcePort) &+ UInt32(input.uint(1)) &- 8
    let flags = [0x02, 0x10, 0x18, 0x11, 0x04, 0x12, 0x14, input.byte()][Int(input.byte() % 8)]
    var options = input.data(maxLength: 40)
    if flags == 0x02, input.bool() { options = [2, 4, 0x05, 0xB4, 1, 3, 3, 7] }
    options += [UInt8](repeating: 0, count: (4 - options.count % 4) % 4)
    let payload = input.data(maxLength: 1200)
    var tcp: [UInt8] = [
        UInt8(sourcePort >> 8), UInt8(sourcePort & 0xFF), UInt8(destinationPort >> 8), UInt8(destinationPort & 0xFF),
    ]
    for shift in [24, 16, 8, 0] { tcp.append(UInt8(truncatingIfNeeded: sequence >> UInt32(shift))) }
    for shift in [24, 16, 8, 0] { tcp.append(UInt8(truncatingIfNeeded: acknowledgment >> UInt32(shift))) }
    tcp += [UInt8((20 + options.count) / 4) << 4, flags, input.byte(), input.byte(), 0, 0, 0, 0]
    let built = header + tcp + options + payload
    return input.byte() % 16 == 0 ? built : TunnelStackFuzzing.sealed(built)
}
