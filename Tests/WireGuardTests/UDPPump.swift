import AgentTestSupport
import Foundation
import WireGuard
#if canImport(Glibc)
import Glibc
#endif

/// Drives a device against one UDP peer (wireguard-go) on the calling thread: datagrams in
/// → `receive`, the sink's datagrams out → `sendto`, timers on the device's deadlines.
/// Synchronous and bounded; run it with `onThread`.
struct UDPPump {
    var device: WireGuardDevice
    let fd: Int32
    let peerPort: UInt16
    let start = ContinuousClock.now
    /// IP packets the device delivered.
    var delivered: [[UInt8]] = []
    var results: [WireGuardReceiveResult] = []

    var now: WireGuardInstant {
        let elapsed = ContinuousClock.now - start
        return WireGuardInstant(nanoseconds: UInt64(elapsed.components.seconds) * 1_000_000_000 + UInt64(elapsed.components.attoseconds / 1_000_000_000))
    }

    /// Sends what the sink holds and moves its packets to `delivered`.
    mutating func flush(_ sink: inout WireGuardCollectingSink) {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = peerPort.bigEndian
        for datagram in sink.datagrams {
            _ = datagram.bytes.withUnsafeBytes { bytes in
                withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        sendto(fd, bytes.baseAddress, bytes.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                    }
                }
            }
        }
        delivered += sink.packets.map(\.bytes)
        sink = WireGuardCollectingSink()
    }

    /// Sends an IP packet through the device.
    mutating func send(_ packet: [UInt8]) {
        var sink = WireGuardCollectingSink()
        device.send(packet, now: now, into: &sink)
        flush(&sink)
    }

    /// Runs until `done` holds or `seconds` pass (and at most 100,000 rounds); `onPacket`
    /// answers each delivered packet (returns packets to send back).
    mutating func run(seconds: Int, onPacket: ([UInt8]) -> [[UInt8]], done: (inout UDPPump) -> Bool) -> Bool {
        let deadline = ContinuousClock.now + .seconds(seconds)
        var buffer = [UInt8](repeating: 0, count: 65536)
        for _ in 0..<100_000 {
            if done(&self) { return true }
            guard ContinuousClock.now < deadline else { return false }
            var waitMs: Int32 = 50
            if let next = device.nextDeadline() {
                let ms = next.since(now) / 1_000_000
                waitMs = Int32(min(UInt64(waitMs), ms))
            }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            var sink = WireGuardCollectingSink()
            if poll(&pfd, 1, waitMs) > 0 {
                let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if n > 0 {
                    results.append(buffer.withUnsafeBytes { device.receive(UnsafeRawBufferPointer(rebasing: $0[0..<n]), now: now, into: &sink) })
                }
            }
            if let next = device.nextDeadline(), next <= now { device.tick(now: now, into: &sink) }
            let before = delivered.count
            flush(&sink)
            for packet in delivered[before...] {
                for answer in onPacket(packet) { send(answer) }
            }
        }
        return done(&self)
    }
}

/// An ICMPv6 echo request in `packet` (IPv6, next header 58, type 128): its id, sequence
/// and data.
func echoRequest(in packet: [UInt8]) -> (source: IPAddress, destination: IPAddress, identifier: UInt16, sequence: UInt16, data: [UInt8])? {
    guard let view = IPPacketView(packet), view.version == 6, view.nextHeader == 58, view.payloadLength >= 8,
        packet[40] == 128
    else { return nil }
    return (
        view.source, view.destination, UInt16(packet[44]) << 8 | UInt16(packet[45]), UInt16(packet[46]) << 8 | UInt16(packet[47]),
        Array(packet[48..<view.totalLength])
    )
}
