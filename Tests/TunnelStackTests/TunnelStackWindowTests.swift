import AgentTestSupport
import CLwIPGlue
import NIOCore
import Synchronization
import Testing

@testable import TunnelStack

/// The receive window a tunnel connection announces, with hand-built packets against real
/// lwIP: lwIP's own 64 KiB whether or not the peer scales windows, and never more than
/// announced (the bound on what waits for a pipeline that does not read).
struct TunnelStackWindowTests {
    let peer = TunnelAddress("fd7a:115c:a1e0::78")!
    /// The tunnel's MSS for MTU 1280.
    let segmentSize = 1220
    /// lwIP's TCP_WND (Debian's build).
    let window = 0xFFFF

    /// A stack whose port-4 pipelines never read: nothing they receive reopens the window.
    /// The last accepted channel lands in `accepted`.
    func makeStack(_ index: UInt8, sent: PacketLog, accepted: AcceptedChannel = AcceptedChannel()) async throws -> TunnelStack {
        let acceptor = TunnelAcceptor { channel in
            accepted.channel.withLock { $0 = channel }
            return channel.setOption(ChannelOptions.autoRead, value: false)
        }
        return try await TunnelStack.start(
            addresses: stackAddresses(index), configuration: TunnelStackConfiguration(), eventLoop: lwIPTestLoop,
            output: { packet in sent.append(Array(packet)) }, acceptors: [4: acceptor])
    }

    /// Opens a connection from `port` (the SYN with or without the window-scale option) and
    /// returns the stack's SYN-ACK and the first sequence number of the peer's data.
    func handshake(_ stack: TunnelStack, sent: PacketLog, port: UInt16, scale: UInt8?) async throws -> (synAck: [UInt8], next: UInt32) {
        let local = stack.addresses[0]
        let options: [UInt8] = [2, 4, 0x04, 0xC4] + (scale.map { [1, 3, 3, $0] } ?? [])
        await stack.feed(PacketBuilder.tcp(from: peer, port, to: local, 4, sequence: 1000, flags: 0x02, options: options))
        let synAck = try #require(sent.all.last)
        #expect(synAck[53] == 0x12)
        sent.clear()
        await stack.feed(
            PacketBuilder.tcp(from: peer, port, to: local, 4, sequence: 1001, acknowledgment: Segment.sequence(synAck) &+ 1, flags: 0x10))
        return (synAck, 1001)
    }

    /// Full segments that fit in the window: 53 in 65 535 bytes.
    var fitting: Int { window / segmentSize }

    /// Sends three full segments more than the window holds, from `next`; returns the
    /// highest acknowledgment the stack sent meanwhile (relative to `next`) once it covered
    /// the segments that fit (lwIP may delay the last ACK by its 250 ms timer), or after a
    /// generous bound.
    func overfillWindow(_ stack: TunnelStack, sent: PacketLog, port: UInt16, synAck: [UInt8], from next: UInt32) async -> Int {
        sent.clear()
        let payload = [UInt8](repeating: 0x5A, count: segmentSize)
        for index in 0..<(fitting + 3) {
            let sequence = next &+ UInt32(index * segmentSize)
            await stack.feed(
                PacketBuilder.tcp(
                    from: peer, port, to: stack.addresses[0], 4, sequence: sequence, acknowledgment: Segment.sequence(synAck) &+ 1,
                    flags: 0x18, payload: payload))
        }
        let highest: @Sendable () -> Int = { sent.all.map { Int(Segment.acknowledgment($0) &- next) }.max() ?? 0 }
        let expected = fitting * segmentSize
        _ = await eventually(timeout: .seconds(20)) { highest() >= expected }
        return highest()
    }

    @Test func aPeerThatScalesWindowsGetsLwIPsWindowAndNoMore() async throws {
        let sent = PacketLog()
        let accepted = AcceptedChannel()
        let stack = try await makeStack(0x50, sent: sent, accepted: accepted)
        let (synAck, next) = try await handshake(stack, sent: sent, port: 44000, scale: 7)
        // The SYN-ACK offers lwIP's scale (1) and, unscaled as in every SYN, its window.
        #expect(Segment.windowScale(synAck) == 1)
        #expect(Segment.window(synAck) == window)
        // The 54th segment does not fit. Nothing is read, so nothing reopens the window: the
        // 53 that fit are acknowledged, the rest dropped.
        #expect(await overfillWindow(stack, sent: sent, port: 44000, synAck: synAck, from: next) == fitting * segmentSize)
        #expect(stack.counters().packetsDropped >= 3)
        // The last acknowledgment closes the window: what is held is what was announced.
        let last = try #require(sent.all.last)
        #expect(Segment.window(last) << 1 == (window - fitting * segmentSize) & ~1)
        // Closed by the pipeline (which lets go of what it never read): FIN, not a reset.
        let channel = try #require(accepted.channel.withLock { $0 })
        sent.clear()
        try await channel.close().get()
        let closing = sent.all
        #expect(closing.contains { $0[53] & 0x01 != 0 })
        #expect(!closing.contains { $0[53] & 0x04 != 0 })
        await stack.shutdown()
    }

    @Test func aPeerThatDoesNotScaleGetsTheSameWindow() async throws {
        let sent = PacketLog()
        let stack = try await makeStack(0x51, sent: sent)
        let (synAck, next) = try await handshake(stack, sent: sent, port: 44001, scale: nil)
        #expect(Segment.windowScale(synAck) == nil)
        #expect(await overfillWindow(stack, sent: sent, port: 44001, synAck: synAck, from: next) == fitting * segmentSize)
        await stack.shutdown()
    }
}

/// The channel an acceptor was last given.
final class AcceptedChannel: Sendable {
    let channel = Mutex<(any Channel)?>(nil)
}

/// Fields of a TCP segment in an IPv6 packet with a 40-byte header.
enum Segment {
    static func word(_ packet: [UInt8], _ offset: Int) -> UInt32 {
        (0..<4).reduce(UInt32(0)) { $0 << 8 | UInt32(packet[offset + $1]) }
    }
    static func sequence(_ packet: [UInt8]) -> UInt32 { word(packet, 44) }
    static func acknowledgment(_ packet: [UInt8]) -> UInt32 { word(packet, 48) }
    /// The window field as sent (before the peer applies the scale).
    static func window(_ packet: [UInt8]) -> Int { Int(packet[54]) << 8 | Int(packet[55]) }
    /// The window-scale option's shift, if the segment has one.
    static func windowScale(_ packet: [UInt8]) -> UInt8? {
        let header = Int(packet[40 + 12] >> 4) * 4
        var index = 40 + 20
        while index + 1 < 40 + header {  // bounded by the header
            switch packet[index] {
            case 0: return nil
            case 1: index += 1
            case 3: return packet[index + 2]
            default: index += max(2, Int(packet[index + 1]))
            }
        }
        return nil
    }
}
