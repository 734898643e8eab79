import Testing
import WireGuard

/// The protocol's timers, driven by a hand-held clock.
@Suite struct TimerTests {
    static let second: UInt64 = 1_000_000_000

    @Test func passiveKeepaliveTenSecondsAfterData() throws {
        var link = try TestLink()
        link.establish()
        let dataAt = link.now
        // B received data and sent nothing: its keepalive is due 10 s later, not before.
        #expect(link.b.nextDeadline() == dataAt.adding(nanoseconds: 10 * Self.second))
        link.now = dataAt.adding(nanoseconds: 10 * Self.second - 1)
        let quiet = link.tick().fromB
        #expect(quiet.isEmpty)
        link.now = dataAt.adding(nanoseconds: 10 * Self.second)
        let fromB = link.tick().fromB
        #expect(fromB.count == 1 && fromB[0].count == 32 && messageType(fromB[0]) == 4)
        let got1 = link.toA(fromB).0
        #expect(got1 == [.keepalive(link.keyB.publicKey)])
        #expect(link.b.counters.keepalivesSent == 1)
    }

    @Test func newHandshakeWhenDataGetsNoAnswerForFifteenSeconds() throws {
        var link = try TestLink()
        link.establish()
        let dataAt = link.now
        link.deliverFromB = false
        link.advance(to: dataAt.adding(nanoseconds: 15 * Self.second - 1))
        #expect(link.sentByA(type: 1).count == 1)
        link.advance(to: dataAt.adding(nanoseconds: 16 * Self.second))
        let initiations = link.sentByA(type: 1)
        #expect(initiations.count == 2)
        let delay = initiations[1].at.since(dataAt)
        #expect(delay >= 15 * Self.second && delay < 15 * Self.second + 334_000_000)
    }

    @Test func initiatorRekeysWhenSendingAfter120Seconds() throws {
        var link = try TestLink()
        link.establish()
        let start = link.now
        link.advance(to: start.adding(nanoseconds: 119 * Self.second))
        let got2 = link.sendFromA(link.packet(fromA: true, [1])).1.map(messageType)
        #expect(got2 == [4])
        link.advance(to: start.adding(nanoseconds: 121 * Self.second))
        let out = link.sendFromA(link.packet(fromA: true, [2])).1
        #expect(out.map(messageType) == [4, 1])
        // The new handshake completes and the next data uses it.
        link.pump(fromA: out)
        #expect(link.a.counters.handshakesCompletedAsInitiator == 2)
        let next = link.sendFromA(link.packet(fromA: true, [3])).1
        link.pump(fromA: next)
        #expect(link.deliveredToB.last == link.packet(fromA: true, [3]))
        #expect(link.b.counters.handshakesConfirmedAsResponder == 2)
        // The responder never re-keys on time alone.
        #expect(link.sentByB(type: 1).isEmpty)
    }

    @Test func sessionsAreRejectedAfter180Seconds() throws {
        var link = try TestLink()
        link.establish()
        let start = link.now
        link.deliverFromA = false
        link.deliverFromB = false
        link.now = start.adding(nanoseconds: 179 * Self.second)
        let late = link.sendFromA(link.packet(fromA: true, [1])).1
        #expect(late.first.map(messageType) == 4)
        // Delivered after the session's 180 s: refused.
        link.now = start.adding(nanoseconds: 181 * Self.second)
        let got3 = link.toB([late[0]]).0
        #expect(got3 == [.dropped(.noSession)])
        // A no longer sends on it: the packet waits for a new handshake.
        let got4 = link.sendFromA(link.packet(fromA: true, [2])).0
        #expect(got4 == .queued(link.keyB.publicKey))
    }

    @Test func responderWithDataOnARejectedSessionBecomesTheInitiator() throws {
        var link = try TestLink()
        link.establish()
        let start = link.now
        link.advance(to: start.adding(nanoseconds: 181 * Self.second))
        // B (responder so far) has data for A on a session past RejectAfterTime: it queues
        // it and starts a handshake of its own, which completes and carries the data.
        let (result, out) = link.sendFromB(link.packet(fromA: false, [42]))
        #expect(result == .queued(link.keyA.publicKey))
        #expect(out.map(messageType) == [1])
        link.pump(fromB: out)
        #expect(link.b.counters.handshakesCompletedAsInitiator == 1)
        #expect(link.deliveredToA.last == link.packet(fromA: false, [42]))
    }

    @Test func keysAreZeroedAfter540Seconds() throws {
        var link = try TestLink()
        link.establish()
        let start = link.now
        let old = link.sendFromA(link.packet(fromA: true, [1])).1
        link.pump(fromA: old)
        link.advance(to: start.adding(nanoseconds: 540 * Self.second - 1))
        #expect(link.a.status(of: link.keyB.publicKey)?.hasSendableSession == true)
        link.advance(to: start.adding(nanoseconds: 540 * Self.second))
        #expect(link.a.status(of: link.keyB.publicKey)?.hasSendableSession == false)
        #expect(link.b.status(of: link.keyA.publicKey)?.hasSendableSession == false)
        #expect(link.a.nextDeadline() == nil && link.b.nextDeadline() == nil)
        // Old traffic finds no session; new traffic needs a new handshake, which works.
        let got5 = link.toB(old).0
        #expect(got5 == [.dropped(.noSession)])
        let (result, out) = link.sendFromA(link.packet(fromA: true, [2]))
        #expect(result == .queued(link.keyB.publicKey))
        link.pump(fromA: out)
        #expect(link.deliveredToB.last == link.packet(fromA: true, [2]))
    }

    @Test func handshakeRetriesEveryFiveSecondsThenGivesUp() throws {
        var link = try TestLink()
        link.deliverFromA = false
        let start = link.now
        _ = link.sendFromA(link.packet(fromA: true, [1]))
        link.advance(to: start.adding(nanoseconds: 200 * Self.second))
        let times = link.sentByA(type: 1).map(\.at)
        // The first try and 19 retries (wireguard-go: give up once attempts exceed 18).
        #expect(times.count == 20)
        for (earlier, later) in zip(times, times.dropFirst()) {
            let gap = later.since(earlier)
            #expect(gap >= 5 * Self.second && gap < 5 * Self.second + 334_000_000)
        }
        #expect(times.last!.since(start) >= 90 * Self.second)
        #expect(link.a.counters.drops(.handshakeTimeout) == 1)
        #expect(link.a.status(of: link.keyB.publicKey)?.queuedPackets == 0)
        #expect(link.a.counters.initiationsSent == 20)
    }

    @Test func persistentKeepaliveWhenConfigured() throws {
        var link = try TestLink()
        try link.a.setPeer(
            WireGuardPeerConfiguration(
                publicKey: link.keyB.publicKey, allowedIPs: [IPPrefix(link.addressB, bits: 128)!], persistentKeepaliveSeconds: 25))
        link.establish()
        let start = link.now
        // B's passive keepalive at +10 s re-arms it: keepalives at +35, +60, +85 s.
        link.advance(to: start.adding(nanoseconds: 100 * Self.second))
        let keepalives = link.sentByA(type: 4).filter { $0.bytes.count == 32 }
        #expect(keepalives.map { $0.at.since(start) } == [35, 60, 85].map { $0 * Self.second })
    }
}
