import CTailnetCrypto
import Testing
import WireGuard

/// Two devices of this implementation, initiator A and responder B, back to back.
@Suite struct HandshakeTests {
    @Test func handshakeThenDataBothWays() throws {
        var link = try TestLink()
        let first = link.packet(fromA: true, Array("hello from A".utf8))
        let (result, out) = link.sendFromA(first)
        #expect(result == .queued(link.keyB.publicKey))
        #expect(out.count == 1 && out[0].count == 148 && messageType(out[0]) == 1)
        let results = link.pump(fromA: out)
        #expect(results.contains(.initiationAnswered(link.keyA.publicKey)))
        #expect(results.contains(.handshakeCompleted(link.keyB.publicKey)))
        #expect(results.contains(.packet(link.keyA.publicKey, length: first.count)))
        #expect(link.deliveredToB == [first])
        #expect(link.sentByB(type: 2).count == 1 && link.sentByB(type: 2)[0].bytes.count == 92)

        // B's session is confirmed by A's first transport message: B sends at once.
        let answer = link.packet(fromA: false, Array("hello from B".utf8))
        let (resultB, outB) = link.sendFromB(answer)
        #expect(resultB == .sent(link.keyA.publicKey))
        link.pump(fromB: outB)
        #expect(link.deliveredToA == [answer])

        // Many packets of many sizes both ways, each padded to 16 (within the MTU).
        for size in [0, 1, 15, 16, 17, 100, 1000, 1200, 1240] {
            let p = link.packet(fromA: true, [UInt8](repeating: UInt8(size & 0xff), count: size))
            let (r, o) = link.sendFromA(p)
            #expect(r == .sent(link.keyB.publicKey))
            #expect(o.count == 1)
            let padded = min((p.count + 15) / 16 * 16, 1280)
            #expect(o[0].count == 16 + max(padded, p.count) + 16)
            link.pump(fromA: o)
            #expect(link.deliveredToB.last == p)
        }
        let counters = link.b.counters
        #expect(counters.initiationsAnswered == 1)
        #expect(counters.handshakesConfirmedAsResponder == 1)
        #expect(link.a.counters.handshakesCompletedAsInitiator == 1)
        #expect(counters.packetsDelivered == 10)
        #expect(counters.totalDrops == 0 && link.a.counters.totalDrops == 0)
        #expect(link.b.status(of: link.keyA.publicKey)?.lastHandshake != nil)
    }

    @Test func responderSendsOnlyAfterTheInitiatorsFirstTransportMessage() throws {
        var link = try TestLink()
        var sink = WireGuardCollectingSink()
        link.a.initiateHandshake(with: link.keyB.publicKey, now: link.now, into: &sink)
        let initiation = sink.datagrams.map(\.bytes)
        let (_, response) = link.toB(initiation)
        // B answered but holds an unconfirmed session: its packet waits.
        let (result, out) = link.sendFromB(link.packet(fromA: false, [9]))
        #expect(result == .queued(link.keyA.publicKey))
        #expect(out.isEmpty)
        // A consumes the response and sends its keepalive; B then flushes its queue.
        let (resultsA, keepalive) = link.toA(response)
        #expect(resultsA == [.handshakeCompleted(link.keyB.publicKey)])
        #expect(keepalive.count == 1 && keepalive[0].count == 32)
        let (resultsB, flushed) = link.toB(keepalive)
        #expect(resultsB == [.keepalive(link.keyA.publicKey)])
        #expect(flushed.count == 1 && messageType(flushed[0]) == 4)
        link.toA(flushed)
        #expect(link.deliveredToA == [link.packet(fromA: false, [9])])
    }

    @Test func replayedTransportPacketsAreDropped() throws {
        var link = try TestLink()
        link.establish()
        var datagrams: [[UInt8]] = []
        for i in 0..<3 { datagrams += link.sendFromA(link.packet(fromA: true, [UInt8(i)])).1 }
        // Out of order within the window: all accepted.
        let (results, _) = link.toB([datagrams[2], datagrams[0], datagrams[1]])
        #expect(results.allSatisfy { if case .packet = $0 { true } else { false } })
        // Each again: replays.
        let (replays, _) = link.toB(datagrams)
        #expect(replays == [.dropped(.replay), .dropped(.replay), .dropped(.replay)])
        #expect(link.b.counters.drops(.replay) == 3)
        #expect(link.deliveredToB.count == 4)
    }

    @Test func garbageAndTruncatedMessagesOfEveryTypeAreDropped() throws {
        var link = try TestLink()
        let (_, initiation) = link.sendFromA(link.packet(fromA: true, [1]))
        let (_, response) = link.toB(initiation)
        link.toA(response)
        let transport = link.sendFromA(link.packet(fromA: true, [2])).1[0]
        var generator = SystemRandomNumberGenerator()
        let valid: [[UInt8]] = [initiation[0], response[0], [3, 0, 0, 0] + [UInt8](repeating: 7, count: 60), transport]
        var fresh = try TestLink()
        for message in valid {
            // Every truncation, and random bodies behind each valid header.
            for length in 0..<message.count {
                let (r, out) = fresh.toB([Array(message[0..<length])])
                guard case .dropped = r[0] else { Issue.record("accepted a truncated message"); continue }
                #expect(out.isEmpty)
            }
            for _ in 0..<50 {
                var junk = message
                for i in 4..<junk.count { junk[i] = UInt8.random(in: 0...255, using: &generator) }
                let (r, out) = fresh.toB([junk])
                guard case .dropped = r[0] else { Issue.record("accepted a random message"); continue }
                #expect(out.isEmpty)
            }
        }
        // Every single-bit flip of each valid message, to the device it was made for.
        for (index, message) in valid.enumerated() {
            for i in 0..<message.count {
                var flipped = message
                flipped[i] ^= 0x10
                let r = index == 1 || index == 2 ? link.toA([flipped]).0 : link.toB([flipped]).0
                guard case .dropped = r[0] else { Issue.record("accepted message \(index) with byte \(i) flipped"); continue }
            }
        }
        for type: UInt8 in [0, 5, 255] {
            let (r, _) = fresh.toB([[type, 0, 0, 0] + [UInt8](repeating: 0, count: 144)])
            #expect(r == [.dropped(.malformed)])
        }
        #expect(fresh.b.counters.drops(.malformed) > 0 && fresh.b.counters.drops(.badMAC) > 0)
        // The original pair still works after all that, and B of the fresh pair still answers.
        let (r, _) = link.toB([transport])
        #expect(r == [.packet(link.keyA.publicKey, length: 41)])
        fresh.establish()
        #expect(fresh.deliveredToB.count == 1)
    }

    @Test func wrongMAC1IsDropped() throws {
        var link = try TestLink()
        let (_, out) = link.sendFromA(link.packet(fromA: true, [1]))
        var bad = out[0]
        bad[120] ^= 1
        let (r, answer) = link.toB([bad])
        #expect(r == [.dropped(.badMAC)])
        #expect(answer.isEmpty)
        #expect(link.b.counters.drops(.badMAC) == 1)
        // An initiation meant for another responder: its mac1 is for that key.
        let other = WireGuardPrivateKey.generate()
        var c = WireGuardDevice(configuration: WireGuardConfiguration(privateKey: link.keyA))
        try c.setPeer(WireGuardPeerConfiguration(publicKey: other.publicKey, allowedIPs: [IPPrefix("fd00::1/128")!]))
        var sink = WireGuardCollectingSink()
        c.initiateHandshake(with: other.publicKey, now: link.now, into: &sink)
        let got1 = link.toB(sink.datagrams.map(\.bytes)).0
        #expect(got1 == [.dropped(.badMAC)])
        // The genuine one still works.
        let got2 = link.toB(out).0
        #expect(got2 == [.initiationAnswered(link.keyA.publicKey)])
    }

    /// A handshake initiation to `link`'s B from a key B does not know.
    static func strangersInitiation(to link: TestLink) throws -> [UInt8] {
        var c = WireGuardDevice(configuration: WireGuardConfiguration(privateKey: WireGuardPrivateKey.generate()))
        try c.setPeer(WireGuardPeerConfiguration(publicKey: link.keyB.publicKey, allowedIPs: [IPPrefix(link.addressB, bits: 128)!]))
        var sink = WireGuardCollectingSink()
        c.initiateHandshake(with: link.keyB.publicKey, now: link.now, into: &sink)
        return try #require(sink.datagrams.first?.bytes)
    }

    @Test func initiationFromAnUnknownKeyIsDroppedSilently() throws {
        var link = try TestLink()
        let (r, answer) = link.toB([try Self.strangersInitiation(to: link)])
        #expect(r == [.dropped(.unknownKey)])
        #expect(answer.isEmpty)
        #expect(link.b.counters.drops(.unknownKey) == 1)
    }

    /// A flood of initiations with valid mac1s (anyone with our public key can make them)
    /// costs at most the budget's Diffie-Hellmans: the rest are dropped before that work, and
    /// the budget refills with time.
    @Test func initiationsBeyondTheBudgetAreDroppedBeforeTheirWork() throws {
        var link = try TestLink()
        let initiation = try Self.strangersInitiation(to: link)
        let budget = HandshakeBudget.strangers.burst
        _ = link.toB(Array(repeating: initiation, count: 500))
        #expect(link.b.counters.drops(.unknownKey) == budget)
        #expect(link.b.counters.drops(.handshakeRateLimited) == 500 - budget)
        // A second later the budget is back.
        link.now = link.now.adding(nanoseconds: 1_000_000_000)
        _ = link.toB(Array(repeating: initiation, count: 100))
        #expect(link.b.counters.drops(.unknownKey) == 2 * budget)
    }

    /// Strangers' initiations share one budget; a configured peer's, sent from its own
    /// authenticated source, are charged to its own, so a stranger's flood never starves it.
    @Test func aStrangersFloodLeavesAPeersHandshakeAlone() throws {
        var link = try TestLink()
        let stranger = WireGuardPrivateKey.generate().publicKey
        _ = link.toB(Array(repeating: try Self.strangersInitiation(to: link), count: 500), from: stranger)
        #expect(link.b.counters.drops(.handshakeRateLimited) == 500 - HandshakeBudget.strangers.burst)
        let (_, initiation) = link.sendFromA(link.packet(fromA: true, [1]))
        let (results, answer) = link.toB(initiation, from: link.keyA.publicKey)
        #expect(results == [.initiationAnswered(link.keyA.publicKey)])
        #expect(answer.count == 1)
    }

    /// A peer's own flood is held to its budget and leaves the strangers' one whole.
    @Test func aPeersFloodIsHeldToItsOwnBudget() throws {
        var link = try TestLink()
        let (_, initiation) = link.sendFromA(link.packet(fromA: true, [1]))
        let flood = Array(repeating: try #require(initiation.first), count: 100)
        let (results, _) = link.toB(flood, from: link.keyA.publicKey)
        #expect(results.first == .initiationAnswered(link.keyA.publicKey))
        #expect(link.b.counters.drops(.handshakeRateLimited) == 100 - HandshakeBudget.perPeer.burst)
        let (fromStranger, _) = link.toB([try Self.strangersInitiation(to: link)])
        #expect(fromStranger == [.dropped(.unknownKey)])
        // Its budget refills at its own rate: 50 ms earns one more.
        link.now = link.now.adding(nanoseconds: 50_000_000)
        let (again, _) = link.toB(Array(flood.prefix(2)), from: link.keyA.publicKey)
        #expect(again.last == .dropped(.handshakeRateLimited))
        #expect(again.first != .dropped(.handshakeRateLimited))
    }

    @Test func spoofedInnerSourceIsDropped() throws {
        var link = try TestLink()
        link.establish()
        let spoofed = ipv6Packet(source: IPAddress("fd7a:115c:a1e0::99")!, destination: link.addressB, nextHeader: 17, payload: [1, 2])
        let (result, out) = link.sendFromA(spoofed)
        #expect(result == .sent(link.keyB.publicKey))
        let got3 = link.toB(out).0
        #expect(got3 == [.dropped(.sourceNotAllowed)])
        #expect(link.b.counters.drops(.sourceNotAllowed) == 1)
        #expect(link.deliveredToB.count == 1)
    }

    @Test func replayedAndFloodingInitiationsAreDropped() throws {
        var link = try TestLink()
        let (_, out) = link.sendFromA(link.packet(fromA: true, [1]))
        let got4 = link.toB(out).0
        #expect(got4 == [.initiationAnswered(link.keyA.publicKey)])
        link.now = link.now.adding(nanoseconds: 1_000_000_000)
        let got5 = link.toB(out).0
        #expect(got5 == [.dropped(.handshakeFailed)])
        #expect(link.b.counters.handshakeFailures(.replayedTimestamp) == 1)

        // Another instance with A's key and a later clock: a newer timestamp, but within
        // 20 ms of the last initiation B consumed.
        let later = try #require(link.b.status(of: link.keyA.publicKey)?.lastInitiationTimestamp)
        var a2 = WireGuardDevice(configuration: WireGuardConfiguration(privateKey: link.keyA, wallClock: { 1_800_000_000_000_000_000 }))
        try a2.setPeer(WireGuardPeerConfiguration(publicKey: link.keyB.publicKey, allowedIPs: [IPPrefix(link.addressB, bits: 128)!]))
        var sink = WireGuardCollectingSink()
        a2.initiateHandshake(with: link.keyB.publicKey, now: link.now, into: &sink)
        let first = sink.datagrams.map(\.bytes)
        a2.initiateHandshake(with: link.keyB.publicKey, now: link.now.adding(nanoseconds: 6_000_000_000), into: &sink)
        let second = Array(sink.datagrams.map(\.bytes).dropFirst())
        #expect(second.count == 1)
        let got6 = link.toB(first).0
        #expect(got6 == [.initiationAnswered(link.keyA.publicKey)])
        #expect((link.b.status(of: link.keyA.publicKey)?.lastInitiationTimestamp).map { $0 > later } == true)
        link.now = link.now.adding(nanoseconds: 10_000_000)
        let got7 = link.toB(second).0
        #expect(got7 == [.dropped(.handshakeFailed)])
        #expect(link.b.counters.handshakeFailures(.flood) == 1)
        link.now = link.now.adding(nanoseconds: 20_000_000)
        let got8 = link.toB(second).0
        #expect(got8 == [.initiationAnswered(link.keyA.publicKey)])
    }

    @Test func cookieReplyIsAcceptedAndGivesMAC2() throws {
        var link = try TestLink()
        let (_, out) = link.sendFromA(link.packet(fromA: true, [1]))
        let initiation = out[0]
        #expect(initiation[132..<148].allSatisfy { $0 == 0 })
        // A cookie reply as B would make it under load (whitepaper §5.4.7).
        let cookie = (0..<16).map { UInt8($0 * 3) }
        var cookieKey = [UInt8](repeating: 0, count: 32)
        let label = Array("cookie--".utf8)
        let pub = link.keyB.publicKey.bytes
        #expect(tc_blake2s256(&cookieKey, label, label.count, pub, 32, nil, 0) == 0)
        let nonce = (0..<24).map { UInt8(0xa0 + $0) }
        let mac1 = Array(initiation[116..<132])
        var sealed = [UInt8](repeating: 0, count: 32)
        #expect(tc_xchacha_seal(&sealed, cookie, 16, mac1, 16, nonce, cookieKey) == 0)
        let reply = [3, 0, 0, 0] + Array(initiation[4..<8]) + nonce + sealed
        #expect(reply.count == 64)
        let got9 = link.toA([reply]).0
        #expect(got9 == [.cookieAccepted(link.keyB.publicKey)])
        // A wrong AD (another mac1) is refused.
        var forged = reply
        forged[40] ^= 1
        let got10 = link.toA([forged]).0
        #expect(got10 == [.dropped(.handshakeFailed)])
        // The retry carries mac2 = MAC(cookie, bytes before mac2).
        link.deliverFromA = false
        link.advance(to: link.now.adding(nanoseconds: 5_400_000_000))
        let retries = link.sentByA(type: 1)
        #expect(retries.count == 2)
        let retry = retries[1].bytes
        var mac2 = [UInt8](repeating: 0, count: 16)
        #expect(tc_blake2s_mac(&mac2, 16, cookie, 16, Array(retry[0..<132]), 132) == 0)
        #expect(Array(retry[132..<148]) == mac2)
        // B (not under load) accepts it.
        let got11 = link.toB([retry]).0
        #expect(got11 == [.initiationAnswered(link.keyA.publicKey)])
    }

    @Test func routingQueueBoundAndRuntimePeerChanges() throws {
        var link = try TestLink()
        var sink = WireGuardCollectingSink()
        let got12 = link.a.send(Array(link.packet(fromA: true, [1]).dropLast(1)), now: link.now, into: &sink)
        #expect(got12 == .dropped(.malformed))
        let elsewhere = ipv6Packet(source: link.addressA, destination: IPAddress("fd00::7")!, nextHeader: 17, payload: [1])
        let got13 = link.a.send(elsewhere, now: link.now, into: &sink)
        #expect(got13 == .dropped(.noRoute))
        // No session, nothing delivered: the queue keeps the newest 128.
        link.deliverFromA = false
        for i in 0..<133 { _ = link.sendFromA(link.packet(fromA: true, [UInt8(i)])) }
        #expect(link.a.counters.drops(.queueFull) == 5)
        #expect(link.a.status(of: link.keyB.publicKey)?.queuedPackets == 128)
        #expect(link.sentByA(type: 1).count == 1)
        link.deliverFromA = true
        link.pump(fromA: [link.sentByA(type: 1)[0].bytes])
        #expect(link.deliveredToB == (5..<133).map { link.packet(fromA: true, [UInt8($0)]) })

        // A new prefix for B: routed at once, the session kept.
        try link.a.setPeer(
            WireGuardPeerConfiguration(
                publicKey: link.keyB.publicKey, allowedIPs: [IPPrefix(link.addressB, bits: 128)!, IPPrefix("10.9.0.0/16")!]))
        let v4 = ipv4Packet(source: IPAddress("10.8.0.1")!, destination: IPAddress("10.9.3.4")!, protocolNumber: 17, payload: [5])
        let got14 = link.sendFromA(v4).0
        #expect(got14 == .sent(link.keyB.publicKey))
        // B removes A: A's traffic finds no session at B, B cannot route to A.
        let (_, out) = link.sendFromA(link.packet(fromA: true, [7]))
        link.b.removePeer(link.keyA.publicKey)
        let got15 = link.toB(out).0
        #expect(got15 == [.dropped(.noSession)])
        let got16 = link.sendFromB(link.packet(fromA: false, [8])).0
        #expect(got16 == .dropped(.noRoute))
        // Bounds are enforced.
        var small = WireGuardDevice(configuration: WireGuardConfiguration(privateKey: link.keyA, maximumPeers: 1, maximumAllowedIPsPerPeer: 1))
        try small.setPeer(WireGuardPeerConfiguration(publicKey: link.keyB.publicKey, allowedIPs: [IPPrefix("fd00::1/128")!]))
        #expect(throws: WireGuardConfigurationError.tooManyPeers(limit: 1)) {
            try small.setPeer(WireGuardPeerConfiguration(publicKey: WireGuardPrivateKey.generate().publicKey, allowedIPs: []))
        }
        #expect(throws: WireGuardConfigurationError.tooManyAllowedIPs(limit: 1)) {
            try small.setPeer(
                WireGuardPeerConfiguration(
                    publicKey: link.keyB.publicKey, allowedIPs: [IPPrefix("fd00::1/128")!, IPPrefix("fd00::2/128")!]))
        }
    }

    @Test func ipv4PacketsCrossTheTunnel() throws {
        var link = try TestLink()
        let a4 = IPAddress("100.64.0.1")!
        let b4 = IPAddress("100.64.0.2")!
        try link.a.setPeer(WireGuardPeerConfiguration(publicKey: link.keyB.publicKey, allowedIPs: [IPPrefix(b4, bits: 32)!]))
        try link.b.setPeer(WireGuardPeerConfiguration(publicKey: link.keyA.publicKey, allowedIPs: [IPPrefix(a4, bits: 32)!]))
        let p = ipv4Packet(source: a4, destination: b4, protocolNumber: 17, payload: Array("v4".utf8))
        link.establish(first: p)
        #expect(link.deliveredToB == [p])
    }
}
