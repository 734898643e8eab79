import Testing
@testable import WireGuard

/// IP header views, TSMP pongs, prefixes, the replay window and TAI64N.
@Suite struct PacketTests {
    let coderd = IPAddress("fd7a:115c:a1e0:ab12:4843:cd96:626b:430b")!
    let agent = IPAddress("fd7a:115c:a1e0:def0:1234:5678:9abc:def0")!

    @Test func ipv6HeaderViewValidatesLengths() {
        let packet = ipv6Packet(source: coderd, destination: agent, nextHeader: 6, payload: [1, 2, 3, 4])
        let view = IPPacketView(packet + [0, 0, 0])
        #expect(view?.version == 6)
        #expect(view?.source == coderd && view?.destination == agent)
        #expect(view?.nextHeader == 6 && view?.hopLimit == 64)
        #expect(view?.totalLength == 44 && view?.payloadLength == 4)
        for length in 0..<packet.count { #expect(IPPacketView(Array(packet[0..<length])) == nil) }
        var wrongVersion = packet
        wrongVersion[0] = 0x50
        #expect(IPPacketView(wrongVersion) == nil)
    }

    @Test func ipv4HeaderViewValidatesLengths() {
        let packet = ipv4Packet(source: IPAddress("10.0.0.1")!, destination: IPAddress("10.0.0.2")!, protocolNumber: 1, payload: [8, 0, 0, 0])
        let view = IPPacketView(packet)
        #expect(view?.version == 4 && view?.nextHeader == 1 && view?.totalLength == 24)
        #expect(view?.source.description == "10.0.0.1")
        for length in 0..<packet.count { #expect(IPPacketView(Array(packet[0..<length])) == nil) }
        var badIHL = packet
        badIHL[0] = 0x44
        #expect(IPPacketView(badIHL) == nil)
    }

    @Test func tsmpPingGetsItsPong() throws {
        let data: [UInt8] = [1, 2, 3, 4, 5, 6, 7, 8]
        let ping = ipv6Packet(source: coderd, destination: agent, nextHeader: 99, payload: [0x70] + data)
        let pong = try #require(TSMP.pong(answering: ping))
        #expect(pong == ipv6Packet(source: agent, destination: coderd, nextHeader: 99, payload: [0x6f] + data + [0, 0]))
        #expect(pong.count == 51 && pong[5] == 11 && pong[7] == 64)
    }

    @Test func tsmpRefusesAnythingElse() {
        let data: [UInt8] = [1, 2, 3, 4, 5, 6, 7, 8]
        let ping = ipv6Packet(source: coderd, destination: agent, nextHeader: 99, payload: [0x70] + data)
        #expect(TSMP.pong(answering: ipv6Packet(source: coderd, destination: agent, nextHeader: 17, payload: [0x70] + data)) == nil)
        #expect(TSMP.pong(answering: ipv6Packet(source: coderd, destination: agent, nextHeader: 99, payload: [0x6f] + data)) == nil)
        #expect(TSMP.pong(answering: ipv6Packet(source: coderd, destination: agent, nextHeader: 99, payload: [0x70] + data.dropLast())) == nil)
        #expect(
            TSMP.pong(
                answering: ipv4Packet(
                    source: IPAddress("10.0.0.1")!, destination: IPAddress("10.0.0.2")!,
                    protocolNumber: 99, payload: [0x70] + data)) == nil)
        for length in 0..<ping.count { #expect(TSMP.pong(answering: Array(ping[0..<length])) == nil) }
    }

    @Test func prefixesParseAndMatch() throws {
        let prefix = try #require(IPPrefix("fd7a:115c:a1e0::/48"))
        #expect(prefix.contains(agent) && prefix.contains(coderd))
        #expect(!prefix.contains(IPAddress("fd60:627a:a42b::1")!))
        #expect(IPPrefix("10.0.0.0/8")!.contains(IPAddress("10.200.1.1")!))
        #expect(!IPPrefix("10.0.0.0/8")!.contains(IPAddress("::a00:1")!))
        #expect(IPPrefix("fd00::1/129") == nil && IPPrefix("10.0.0.0/33") == nil && IPPrefix("nonsense") == nil)
        #expect(IPAddress("::")?.value == 0 && IPAddress("::1")?.value == 1)
        #expect(IPAddress("1:2:3:4:5:6:7:8:9") == nil && IPAddress("1::2::3") == nil)
        var table = AllowedIPs()
        let p1 = WireGuardPrivateKey.generate().publicKey
        let p2 = WireGuardPrivateKey.generate().publicKey
        table.insert([IPPrefix("fd00::/8")!], for: p1)
        table.insert([IPPrefix("fd00::5/128")!, IPPrefix("fd00:1::/32")!], for: p2)
        #expect(table.lookup(IPAddress("fd00::5")!) == p2)
        #expect(table.lookup(IPAddress("fd00:1::9")!) == p2)
        #expect(table.lookup(IPAddress("fd00:2::9")!) == p1)
        #expect(table.lookup(IPAddress("fe80::1")!) == nil)
        table.remove(peer: p2)
        #expect(table.lookup(IPAddress("fd00::5")!) == p1)
    }

    @Test func replayWindowFollowsRFC6479() {
        var window = ReplayWindow()
        let limit = WireGuardTimers.rejectAfterMessages
        func check(_ counter: UInt64) -> Bool { window.accept(counter, limit: limit) }
        let answers = [
            check(0), check(0), check(10_000),
            // Within 8128 behind the highest: accepted once.
            check(10_000 - 8128), check(10_000 - 8128),
            // Further behind: refused.
            check(10_000 - 8129 - 64),
            check(9_999), check(9_999),
            // A jump far ahead clears the ring.
            check(1_000_000), check(999_999), check(limit),
        ]
        #expect(answers == [true, false, true, true, false, false, true, false, true, true, false])
        // Every counter of a long run once, in a scrambled order within the window.
        var fresh = ReplayWindow()
        var accepted = 0
        for base in stride(from: UInt64(0), to: 20_000, by: 100) {
            for offset in (0..<100).reversed() {
                if fresh.accept(base + UInt64(offset), limit: limit) { accepted += 1 }
            }
        }
        #expect(accepted == 20_000)
    }

    @Test func tai64nWhitensAndOrders() {
        let t = TAI64N(unixNanoseconds: 1_700_000_000_123_456_789)
        #expect(t.unixSeconds == 1_700_000_000)
        #expect(t.nanoseconds & 0xff_ffff == 0)
        #expect(TAI64N(bytes: t.bytes) == t)
        #expect(t.bytes.prefix(8) == [0x40, 0, 0, 0, 0x65, 0x53, 0xf1, 0x0a])
        #expect(t.nextStep() > t)
    }
}
