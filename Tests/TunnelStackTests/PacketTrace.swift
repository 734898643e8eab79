import Foundation
import Synchronization

/// The last TCP segments through a ``NamespaceTunnel``'s TUN, both ways, for the failure
/// message of a test whose connection went wrong: which SYN, SYN-ACK, ACK or RST reached
/// which side, and when. Bounded: a ring of ``capacity`` headers, nothing else kept.
final class PacketTrace: Sendable {
    static let capacity = 256

    /// One TCP segment's header fields.
    struct Entry {
        var milliseconds: UInt64
        var toStack: Bool
        var sourcePort: UInt16
        var destinationPort: UInt16
        var flags: UInt8
        var sequence: UInt32
        var acknowledgement: UInt32
        var window: UInt16
        var payload: Int
    }

    private struct Ring {
        var entries: [Entry] = []
        var next = 0
        var dropped = 0
    }

    private let start = ContinuousClock.now
    private let ring = Mutex(Ring())

    /// Records `packet` if it is IPv6 carrying TCP without extension headers.
    func record(_ packet: UnsafeRawBufferPointer, toStack: Bool) {
        guard packet.count >= 60, packet[0] >> 4 == 6, packet[6] == 6 else { return }
        func u16(_ at: Int) -> UInt16 { UInt16(packet[at]) << 8 | UInt16(packet[at + 1]) }
        func u32(_ at: Int) -> UInt32 { UInt32(u16(at)) << 16 | UInt32(u16(at + 2)) }
        let headerLength = Int(packet[52] >> 4) * 4
        let elapsed = ContinuousClock.now - start
        let entry = Entry(
            milliseconds: UInt64(elapsed.components.seconds) * 1000 + UInt64(elapsed.components.attoseconds / 1_000_000_000_000_000),
            toStack: toStack, sourcePort: u16(40), destinationPort: u16(42), flags: packet[53], sequence: u32(44),
            acknowledgement: u32(48), window: u16(54), payload: max(0, Int(u16(4)) - headerLength))
        ring.withLock { ring in
            if ring.entries.count < Self.capacity {
                ring.entries.append(entry)
            } else {
                ring.entries[ring.next] = entry
                ring.dropped += 1
            }
            ring.next = (ring.next + 1) % Self.capacity
        }
    }

    /// The recorded segments, oldest first, one line each (`peer>stack` is toward the stack).
    func text() -> String {
        let (entries, dropped) = ring.withLock { ring in
            (Array(ring.entries[ring.next...] + ring.entries[..<ring.next]), ring.dropped)
        }
        var lines = ["packets (last \(entries.count); \(dropped) earlier not kept):"]
        for entry in entries {
            let names: [(UInt8, String)] = [(0x02, "S"), (0x10, "."), (0x08, "P"), (0x01, "F"), (0x04, "R")]
            let flags = names.filter { entry.flags & $0.0 != 0 }.map(\.1).joined()
            lines.append(
                "\(entry.milliseconds) ms \(entry.toStack ? "peer>stack" : "stack>peer") \(entry.sourcePort)>\(entry.destinationPort) "
                    + "[\(flags)] seq \(entry.sequence) ack \(entry.acknowledgement) win \(entry.window) len \(entry.payload)")
        }
        return lines.joined(separator: "\n")
    }
}
