import AgentTestSupport
import DERP
import Testing
import WireGuard
@testable import Tailnet

/// Two direct-path cores exchanging their outputs over a simulated network on a hand-driven
/// clock: discovery, the pong that makes a path, CallMeMaybe over DERP, STUN and the
/// endpoint list, blocking, and hostile datagrams.
@Suite struct DirectPathsTests {
    struct Side {
        var paths: DirectPaths
        let node: WireGuardPrivateKey
        let disco: X25519PrivateKey
        let endpoint: DiscoEndpoint
        var key: WireGuardPublicKey { node.publicKey }

        init(address: String, port: UInt16) {
            node = WireGuardPrivateKey.generate()
            disco = X25519PrivateKey.generate()
            endpoint = DiscoEndpoint("\(address):\(port)")!
            paths = DirectPaths(discoKey: disco, nodeKey: X25519PublicKey(node.publicKey.bytes)!)
            let local = DiscoEndpoint("\(address):0")!
            paths.localAddresses = { [local] }
            paths.setPorts(v4: port, v6: nil, fixed: nil)
        }
    }

    static func at(_ ms: UInt64) -> WireGuardInstant { WireGuardInstant(nanoseconds: ms * 1_000_000) }

    /// Introduces each side to the other with the other's endpoint in its Node.
    static func pair() -> (Side, Side, SplitMix64) {
        var random = SplitMix64(seed: 42)
        var a = Side(address: "10.0.1.2", port: 41001)
        var b = Side(address: "10.0.2.2", port: 41002)
        var out = DirectOutput()
        a.paths.upsertPeer(b.key, disco: b.disco.publicKey, homeRegion: 1, endpoints: [b.endpoint], now: at(0), random: &random, into: &out)
        b.paths.upsertPeer(a.key, disco: a.disco.publicKey, homeRegion: 1, endpoints: [a.endpoint], now: at(0), random: &random, into: &out)
        return (a, b, random)
    }

    /// Delivers `from`'s UDP output addressed to `to`'s endpoint; returns `to`'s output.
    static func deliver(_ out: DirectOutput, from: Side, to: inout Side, now: WireGuardInstant, random: inout SplitMix64) -> DirectOutput {
        var answer = DirectOutput()
        for datagram in out.udp where datagram.to == to.endpoint {
            _ = to.paths.receiveUDP(datagram.bytes, from: from.endpoint, now: now, random: &random, into: &answer)
        }
        return answer
    }

    @Test func aPongMakesTheDirectPathAndLetsWireGuardIn() throws {
        var (a, b, random) = Self.pair()
        // Before any disco, WireGuard from a's address is not b's to accept.
        var scratch = DirectOutput()
        let result1 = b.paths.receiveUDP([1, 0, 0, 0] + Array(repeating: 0, count: 44), from: a.endpoint, now: Self.at(1), random: &random, into: &scratch)
        #expect(result1 == .unverified)

        var out = DirectOutput()
        let result2 = a.paths.route(to: b.key, now: Self.at(10), random: &random, into: &out)
        #expect(result2 == .derp)
        #expect(out.udp.count == 1 && out.udp[0].to == b.endpoint && out.udp[0].bytes.count == 1310)
        #expect(out.derp.count == 1 && out.derp[0].peer == b.key)  // CallMeMaybe over DERP
        let pong = Self.deliver(out, from: a, to: &b, now: Self.at(11), random: &random)
        #expect(pong.udp.count == 1 && pong.udp[0].to == a.endpoint)
        // b now accepts WireGuard from a's source.
        let result3 = b.paths.receiveUDP([4, 0, 0, 0] + Array(repeating: 0, count: 28), from: a.endpoint, now: Self.at(12), random: &random, into: &scratch)
        #expect(result3 == .wireGuard(a.key))
        _ = Self.deliver(pong, from: b, to: &a, now: Self.at(15), random: &random)
        var next = DirectOutput()
        let result4 = a.paths.route(to: b.key, now: Self.at(16), random: &random, into: &next)
        #expect(result4 == .direct(b.endpoint))
        #expect(next.udp.isEmpty && next.derp.isEmpty)
        #expect(a.paths.counters.pongsReceived == 1 && a.paths.counters.pathSwitches == 1)
        // The pong told a where b saw it: its source, as an IPv4-mapped address.
        let opened = try Disco.open(pong.udp[0].bytes, privateKey: a.disco)
        #expect(opened.message == .pong(txID: (try Disco.open(out.udp[0].bytes, privateKey: b.disco)).message.txID!, address: a.endpoint.address, port: a.endpoint.port))
        // A third party's WireGuard from another address is still refused.
        let result5 = b.paths.receiveUDP([4, 0, 0, 0] + Array(repeating: 0, count: 28), from: DiscoEndpoint("10.9.9.9:1")!, now: Self.at(17), random: &random, into: &scratch)
        #expect(result5 == .unverified)
    }

    @Test func callMeMaybeOverDERPMakesThePeerPingBack() throws {
        var (a, b, random) = Self.pair()
        var out = DirectOutput()
        // a published its local endpoint when its first peer came (no STUN servers).
        #expect(a.paths.published == [a.endpoint])
        _ = a.paths.route(to: b.key, now: Self.at(10), random: &random, into: &out)
        let callMeMaybe = try #require(out.derp.first)
        var answer = DirectOutput()
        let result6 = b.paths.receiveDERPDisco(callMeMaybe.bytes, from: a.key, region: 1, now: Self.at(20), random: &random, into: &answer)
        #expect(result6)
        #expect(answer.udp.map(\.to) == [a.endpoint])
        #expect(answer.derp.isEmpty)
        #expect(b.paths.counters.callMeMaybeReceived == 1)
        // From a DERP source key that is not the disco key's peer: ignored.
        var ignored = DirectOutput()
        _ = b.paths.receiveDERPDisco(callMeMaybe.bytes, from: WireGuardPrivateKey.generate().publicKey, region: 1, now: Self.at(21), random: &random, into: &ignored)
        #expect(ignored.udp.isEmpty)
        // A ping over DERP is answered over DERP with 127.3.3.40:<region>.
        let ping = try #require(Disco.seal(.ping(txID: Array(repeating: 3, count: 12), nodeKey: nil), privateKey: a.disco, to: b.disco.publicKey))
        var derpPong = DirectOutput()
        _ = b.paths.receiveDERPDisco(ping, from: a.key, region: 7, now: Self.at(22), random: &random, into: &derpPong)
        let reply = try Disco.open(try #require(derpPong.derp.first).bytes, privateKey: a.disco)
        #expect(reply.message == .pong(txID: Array(repeating: 3, count: 12), address: DiscoEndpoint.ipv4Mapped(127, 3, 3, 40, port: 7).address, port: 7))
    }

    @Test func stunReportPublishesTheMappedAddressFirst() throws {
        var (a, _, random) = Self.pair()
        var out = DirectOutput()
        let server1 = STUNServer(region: 1000, endpoint: DiscoEndpoint("10.0.0.64:3478")!)
        let server2 = STUNServer(region: 1001, endpoint: DiscoEndpoint("10.0.0.65:3478")!)
        a.paths.setServers([server1, server2], now: Self.at(0), random: &random, into: &out)
        #expect(out.udp.count == 2 && out.udp.allSatisfy { $0.bytes.count == 40 })
        #expect(a.paths.run != nil)
        let mapped = DiscoEndpoint("198.51.100.7:48011")!
        var answer = DirectOutput()
        // A reply with a TxID we did not send is ignored.
        _ = a.paths.receiveUDP(STUN.response(txID: Array(repeating: 0, count: 12), mapped: mapped), from: server1.endpoint, now: Self.at(5), random: &random, into: &answer)
        #expect(a.paths.lastReport == nil)
        for request in out.udp {
            let txID = Array(request.bytes[8..<20])
            // The hard-NAT case: each server sees another port.
            let seen = DiscoEndpoint(address: mapped.address, port: request.to == server1.endpoint ? 48011 : 48012)
            _ = a.paths.receiveUDP(STUN.response(txID: txID, mapped: seen), from: request.to, now: Self.at(30), random: &random, into: &answer)
        }
        let report = try #require(a.paths.lastReport)
        #expect(report.udp && report.globalV4 != nil && report.mappingVariesByDestIP == true)
        let published = try #require(answer.publish)
        #expect(published.first == report.globalV4)
        #expect(published.contains(a.endpoint))
        // The next report is due 20–26 s later, only while the tunnel is active.
        let due = try #require(a.paths.nextDeadline)
        #expect(due >= Self.at(20_030) && due <= Self.at(26_030))
    }

    /// Endpoints older than 27 s are refreshed before a CallMeMaybe: it waits for the report
    /// and carries what the report found.
    @Test func aCallMeMaybeWithStaleEndpointsFollowsTheReport() throws {
        var (a, b, random) = Self.pair()
        var out = DirectOutput()
        let server = STUNServer(region: 1000, endpoint: DiscoEndpoint("10.0.0.64:3478")!)
        a.paths.setServers([server], now: Self.at(0), random: &random, into: &out)
        a.paths.tick(now: Self.at(2_000), random: &random, into: &out)  // no answer: the report ends at its budget
        #expect(a.paths.run == nil && a.paths.endpointsRefreshedAt == Self.at(2_000))

        var round = DirectOutput()
        _ = a.paths.route(to: b.key, now: Self.at(40_000), random: &random, into: &round)
        #expect(round.derp.isEmpty, "no CallMeMaybe before the report")
        #expect(a.paths.callMeMaybeWaiting == [b.key])
        let request = try #require(round.udp.first { $0.to == server.endpoint })
        let mapped = DiscoEndpoint("198.51.100.7:48011")!
        var answer = DirectOutput()
        _ = a.paths.receiveUDP(STUN.response(txID: Array(request.bytes[8..<20]), mapped: mapped), from: server.endpoint, now: Self.at(40_030), random: &random, into: &answer)
        let callMeMaybe = try #require(answer.derp.first)
        #expect(callMeMaybe.peer == b.key && a.paths.callMeMaybeWaiting.isEmpty)
        let opened = try Disco.open(callMeMaybe.bytes, privateKey: b.disco)
        guard case .callMeMaybe(let endpoints) = opened.message else {
            Issue.record("not a CallMeMaybe: \(opened.message)")
            return
        }
        #expect(endpoints.contains(mapped), "the fresh mapping: \(endpoints)")
    }

    /// A peer's pings from many new addresses replace only its own least recently heard
    /// sources: its source in use and every other peer's stay verified.
    @Test func onePeersPingsFromManyAddressesKeepOthersSources() throws {
        var (a, b, random) = Self.pair()
        let c = Side(address: "10.0.3.2", port: 41003)
        var scratch = DirectOutput()
        a.paths.upsertPeer(c.key, disco: c.disco.publicKey, homeRegion: 1, endpoints: [c.endpoint], now: Self.at(0), random: &random, into: &scratch)
        func ping(from source: DiscoEndpoint, as side: Side, _ n: Int, at ms: UInt64) throws {
            let txID = [UInt8(n & 0xff), UInt8(n >> 8)] + Array(repeating: 0, count: 10)
            let sealed = try #require(Disco.seal(.ping(txID: txID, nodeKey: nil), privateKey: side.disco, to: a.disco.publicKey))
            _ = a.paths.receiveUDP(sealed, from: source, now: Self.at(ms), random: &random, into: &scratch)
        }
        try ping(from: c.endpoint, as: c, 0, at: 1)
        try ping(from: b.endpoint, as: b, 1, at: 1)
        for i in 2..<(DirectPaths.maxSources + 100) {
            try ping(from: DiscoEndpoint("10.5.\(i / 250).\(i % 250 + 1):7")!, as: b, i, at: 2)
            // b's own address is heard again now and then: the source in use.
            if i % 8 == 0 { try ping(from: b.endpoint, as: b, 20_000 + i, at: 2) }
        }
        #expect(a.paths.sources[c.endpoint] == c.key, "another peer's source stays")
        #expect(a.paths.sources[b.endpoint] == b.key, "the source in use stays")
        #expect(a.paths.sources.values.filter { $0 == b.key }.count == DirectPaths.maxSourcesPerPeer)
        var wireGuard = DirectOutput()
        #expect(a.paths.receiveUDP([4, 0, 0, 0] + Array(repeating: 0, count: 28), from: c.endpoint, now: Self.at(3), random: &random, into: &wireGuard) == .wireGuard(c.key))
    }

    /// A captured Ping replayed from spoofed addresses: only its first origin is answered
    /// and learned, so the agent reflects no padded Pongs at the spoofed addresses.
    @Test func aPingReplayedFromOtherAddressesGetsNoPong() throws {
        var (a, b, random) = Self.pair()
        let txID: [UInt8] = Array(repeating: 9, count: 12)
        let sealed = try #require(Disco.seal(.ping(txID: txID, nodeKey: nil), privateKey: b.disco, to: a.disco.publicKey))
        var first = DirectOutput()
        _ = a.paths.receiveUDP(sealed, from: b.endpoint, now: Self.at(1), random: &random, into: &first)
        #expect(first.udp.map(\.to) == [b.endpoint])
        var replies = DirectOutput()
        for i in 0..<50 {
            _ = a.paths.receiveUDP(sealed, from: DiscoEndpoint("198.51.100.\(i + 1):9")!, now: Self.at(2), random: &random, into: &replies)
        }
        #expect(replies.udp.isEmpty, "\(replies.udp.count) pongs reflected")
        #expect(a.paths.sources.count == 1 && a.paths.sources[b.endpoint] == b.key)
        // A new Ping from a new address of the peer is answered as ever.
        let fresh = try #require(Disco.seal(.ping(txID: Array(repeating: 10, count: 12), nodeKey: nil), privateKey: b.disco, to: a.disco.publicKey))
        var answer = DirectOutput()
        _ = a.paths.receiveUDP(fresh, from: DiscoEndpoint("10.0.2.3:41002")!, now: Self.at(3), random: &random, into: &answer)
        #expect(answer.udp.count == 1)
    }

    /// A Ping over DERP repeating the last TxID its sender sent that way (same relay source
    /// key, same region) gets no second Pong and changes nothing, as magicsock's per-candidate
    /// `lastGotPingTxID` (the candidate being 127.3.3.40:<region>): only the last TxID
    /// counts, another region is another source, and a source is remembered 45 s after its
    /// last Ping.
    @Test func aPingRepeatingItsTxIDOverDERPIsNotAnsweredAgain() throws {
        var (a, b, random) = Self.pair()
        func ping(_ tx: UInt8, region: Int32 = 7, at ms: UInt64) throws -> Int {
            let sealed = try #require(Disco.seal(.ping(txID: Array(repeating: tx, count: 12), nodeKey: nil), privateKey: a.disco, to: b.disco.publicKey))
            var out = DirectOutput()
            _ = b.paths.receiveDERPDisco(sealed, from: a.key, region: region, now: Self.at(ms), random: &random, into: &out)
            #expect(out.udp.isEmpty && out.publish == nil)
            return out.derp.count
        }
        let first = try #require(Disco.seal(.ping(txID: Array(repeating: 1, count: 12), nodeKey: nil), privateKey: a.disco, to: b.disco.publicKey))
        var out = DirectOutput()
        _ = b.paths.receiveDERPDisco(first, from: a.key, region: 7, now: Self.at(10), random: &random, into: &out)
        #expect(out.derp.count == 1)
        // The very same packet again, then the TxID in a new box: neither is answered.
        out = DirectOutput()
        _ = b.paths.receiveDERPDisco(first, from: a.key, region: 7, now: Self.at(11), random: &random, into: &out)
        #expect(out.derp.isEmpty && out.udp.isEmpty)
        #expect(try ping(1, at: 12) == 0)
        #expect(b.paths.counters.pongsSent == 1 && b.paths.counters.pingsRepeated == 2)
        #expect(try ping(1, region: 8, at: 13) == 1, "through another region: another source")
        #expect(try ping(2, at: 14) == 1)
        #expect(try ping(1, at: 15) == 1, "only the last TxID is remembered")
        #expect(try ping(1, at: 45_015) == 0, "still remembered 45 s after the last ping")
        #expect(try ping(1, at: 90_016) == 1, "forgotten after that")
    }

    /// A client not introduced yet (a CLI ping, answered over DERP) is held to the same rule.
    @Test func aRepeatedPingFromAnUnknownSenderOverDERPIsNotAnsweredAgain() throws {
        var (a, _, random) = Self.pair()
        let stranger = WireGuardPrivateKey.generate().publicKey
        let disco = X25519PrivateKey.generate()
        let ping = try #require(Disco.seal(.ping(txID: Array(repeating: 9, count: 12), nodeKey: nil), privateKey: disco, to: a.disco.publicKey))
        var out = DirectOutput()
        _ = a.paths.receiveDERPDisco(ping, from: stranger, region: 1, now: Self.at(10), random: &random, into: &out)
        _ = a.paths.receiveDERPDisco(ping, from: stranger, region: 1, now: Self.at(20), random: &random, into: &out)
        #expect(out.derp.count == 1 && a.paths.counters.pongsSent == 1 && a.paths.counters.pingsRepeated == 1)
    }

    /// Over UDP the candidate remembers the last TxID; an address a full candidate table
    /// turned away is remembered by the memory of recent pings, so its repeat is not
    /// answered either.
    @Test func aPingRepeatingItsTxIDOverUDPIsNotAnsweredAgainEvenWithAFullCandidateTable() throws {
        var (a, b, random) = Self.pair()
        func ping(from source: DiscoEndpoint, _ n: Int, at ms: UInt64) throws -> DirectOutput {
            let txID = [UInt8(n & 0xff), UInt8(n >> 8)] + Array(repeating: 0, count: 10)
            let sealed = try #require(Disco.seal(.ping(txID: txID, nodeKey: nil), privateKey: b.disco, to: a.disco.publicKey))
            var out = DirectOutput()
            _ = a.paths.receiveUDP(sealed, from: source, now: Self.at(ms), random: &random, into: &out)
            return out
        }
        #expect(try ping(from: b.endpoint, 1, at: 1).udp.count == 1)
        let again = try ping(from: b.endpoint, 1, at: 2)
        #expect(again.udp.isEmpty && again.derp.isEmpty && again.publish == nil)
        for i in 1..<PeerPath.maxCandidates { _ = try ping(from: DiscoEndpoint("10.5.0.\(i):7")!, 100 + i, at: 3) }
        #expect(a.paths.peers[b.key]?.path.candidates.count == PeerPath.maxCandidates)
        let newcomer = DiscoEndpoint("10.9.9.9:9")!
        #expect(try ping(from: newcomer, 500, at: 4).udp.map(\.to) == [newcomer])
        #expect(a.paths.peers[b.key]?.path.candidates[newcomer] == nil, "turned away: the table is full of live candidates")
        #expect(try ping(from: newcomer, 500, at: 5).udp.isEmpty)
        #expect(a.paths.counters.pongsSent == 1 + PeerPath.maxCandidates && a.paths.counters.pingsRepeated == 2)
    }

    /// Disco over DERP from keys no peer holds (a CLI ping before its introduction) is
    /// opened with a key agreement, at most 50 a second.
    @Test func unknownSendersOverDERPAreOpenedAtABoundedRate() throws {
        var (a, _, random) = Self.pair()
        var out = DirectOutput()
        let stranger = WireGuardPrivateKey.generate().publicKey
        func flood(_ count: Int, at ms: UInt64) throws {
            for i in 0..<count {
                let forged = try #require(
                    Disco.seal(.ping(txID: Array(repeating: UInt8(i & 0xff), count: 12), nodeKey: nil), privateKey: X25519PrivateKey.generate(), to: a.disco.publicKey))
                _ = a.paths.receiveDERPDisco(forged, from: stranger, region: 1, now: Self.at(ms), random: &random, into: &out)
            }
        }
        try flood(80, at: 1_000)
        #expect(a.paths.counters.pongsSent == DirectPaths.maxUnknownOpensPerSecond)
        #expect(a.paths.counters.discoUnknownSender == 80 - DirectPaths.maxUnknownOpensPerSecond)
        try flood(10, at: 2_000)
        #expect(a.paths.counters.pongsSent == DirectPaths.maxUnknownOpensPerSecond + 10, "a new second, a new allowance")
    }

    @Test func stunReportEndsAtItsBudgetWithoutAnswers() {
        var (a, _, random) = Self.pair()
        var out = DirectOutput()
        a.paths.setServers([STUNServer(region: 1000, endpoint: DiscoEndpoint("10.0.0.64:3478")!)], now: Self.at(0), random: &random, into: &out)
        #expect(a.paths.nextDeadline == Self.at(2_000))
        a.paths.tick(now: Self.at(1_999), random: &random, into: &out)
        #expect(a.paths.run != nil)
        a.paths.tick(now: Self.at(2_000), random: &random, into: &out)
        #expect(a.paths.run == nil && a.paths.lastReport?.udp == false)
    }

    /// A dual-stack report's two requests, to an IPv4 and an IPv6 server, queued.
    static func dualStackReport(_ side: inout Side, random: inout SplitMix64) -> (v4: (to: DiscoEndpoint, bytes: [UInt8]), v6: (to: DiscoEndpoint, bytes: [UInt8]))? {
        side.paths.setPorts(v4: side.endpoint.port, v6: side.endpoint.port, fixed: nil)
        let v4 = STUNServer(region: 1000, endpoint: DiscoEndpoint("10.0.0.64:3478")!)
        let v6 = STUNServer(region: 1001, endpoint: DiscoEndpoint("[2001:db8::64]:3478")!)
        var out = DirectOutput()
        side.paths.setServers([v4, v6], now: Self.at(0), random: &random, into: &out)
        guard let request4 = out.udp.first(where: { $0.to == v4.endpoint }), let request6 = out.udp.first(where: { $0.to == v6.endpoint }) else { return nil }
        return (request4, request6)
    }

    /// IPv4CanSend / IPv6CanSend say a STUN request of that family was sent (netcheck sets
    /// them after a successful write): a request merely queued sets nothing, the owner's
    /// report of the send does; a failed send leaves the family false and is not waited for.
    @Test func canSendIsSetWhenTheSendSucceededNotWhenQueued() throws {
        var (a, _, random) = Self.pair()
        let requests = try #require(Self.dualStackReport(&a, random: &random))
        let queued = try #require(a.paths.run?.report)
        #expect(!queued.ipv4CanSend && !queued.ipv6CanSend)
        a.paths.sendResult(requests.v4.bytes, to: requests.v4.to, outcome: .sent)
        a.paths.sendResult(requests.v6.bytes, to: requests.v6.to, outcome: .failed)
        #expect(a.paths.run?.report.ipv4CanSend == true)
        #expect(a.paths.run?.report.ipv6CanSend == false)
        #expect(a.paths.run?.pending.count == 1, "the failed request is not waited for")
        var out = DirectOutput()
        a.paths.tick(now: Self.at(2_000), random: &random, into: &out)
        let report = try #require(a.paths.lastReport)
        #expect(report.ipv4CanSend && !report.ipv6CanSend)
    }

    /// Nothing sent, nothing can send: both sends failed.
    @Test func failedSendsLeaveCanSendFalse() throws {
        var (a, _, random) = Self.pair()
        let requests = try #require(Self.dualStackReport(&a, random: &random))
        a.paths.sendResult(requests.v4.bytes, to: requests.v4.to, outcome: .failed)
        a.paths.sendResult(requests.v6.bytes, to: requests.v6.to, outcome: .failed)
        var out = DirectOutput()
        a.paths.tick(now: Self.at(2_000), random: &random, into: &out)
        let report = try #require(a.paths.lastReport)
        #expect(!report.ipv4CanSend && !report.ipv6CanSend && !report.udp)
    }

    /// A request the kernel refused alone (a firewall's EPERM, as tailscale's
    /// `TreatAsLostUDP`) still shows its family can send; an answer proves its request went
    /// out even when it outruns the send's report; a late report for a finished run changes
    /// nothing.
    @Test func canSendCountsALostRequestAndAnAnsweredOne() throws {
        var (a, _, random) = Self.pair()
        let requests = try #require(Self.dualStackReport(&a, random: &random))
        a.paths.sendResult(requests.v6.bytes, to: requests.v6.to, outcome: .lost)
        var out = DirectOutput()
        let response = STUN.response(txID: Array(requests.v4.bytes[8..<20]), mapped: DiscoEndpoint("198.51.100.7:48011")!)
        _ = a.paths.receiveUDP(response, from: requests.v4.to, now: Self.at(30), random: &random, into: &out)
        #expect(a.paths.run != nil, "the lost request is still awaited")
        a.paths.tick(now: Self.at(2_000), random: &random, into: &out)
        let report = try #require(a.paths.lastReport)
        #expect(report.ipv4CanSend && report.ipv6CanSend && report.ipv4 && !report.ipv6)
        a.paths.sendResult(requests.v4.bytes, to: requests.v4.to, outcome: .failed)
        #expect(a.paths.lastReport == report && a.paths.run == nil)
    }

    /// A disco datagram that did not go out (lost or failed) forgets its ping at once.
    @Test func aPingThatWasNotSentIsForgotten() throws {
        var (a, b, random) = Self.pair()
        var out = DirectOutput()
        _ = a.paths.route(to: b.key, now: Self.at(10), random: &random, into: &out)
        let ping = try #require(out.udp.first { $0.to == b.endpoint })
        a.paths.sendResult(ping.bytes, to: ping.to, outcome: .sent)
        #expect(a.paths.peers[b.key]?.path.outstanding.count == 1)
        a.paths.sendResult(ping.bytes, to: ping.to, outcome: .lost)
        #expect(a.paths.peers[b.key]?.path.outstanding.isEmpty == true)
    }

    @Test func blockingWithdrawsEndpointsAndIgnoresUDPDisco() throws {
        var (a, b, random) = Self.pair()
        #expect(b.paths.published == [b.endpoint])
        var out = DirectOutput()
        b.paths.setBlocked(true, now: Self.at(1), random: &random, into: &out)
        #expect(out.publish == [])
        out = DirectOutput()
        _ = a.paths.route(to: b.key, now: Self.at(10), random: &random, into: &out)
        let answer = Self.deliver(out, from: a, to: &b, now: Self.at(11), random: &random)
        #expect(answer.udp.isEmpty)
        var route = DirectOutput()
        let result7 = b.paths.route(to: a.key, now: Self.at(12), random: &random, into: &route)
        #expect(result7 == .derp)
        #expect(route.udp.isEmpty && route.derp.isEmpty)
        // Unblocked: the endpoints come back and pings are answered again.
        out = DirectOutput()
        b.paths.setBlocked(false, now: Self.at(20), random: &random, into: &out)
        #expect(out.publish == [b.endpoint])
    }

    @Test func hostileDatagramsAreDroppedAndCounted() throws {
        var (a, b, random) = Self.pair()
        var generator = SplitMix64(seed: 9)
        var out = DirectOutput()
        for i in 0..<500 {
            let length = Int(generator.next() % 1500)
            var bytes = (0..<length).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            if i % 3 == 0, bytes.count >= 62 { bytes.replaceSubrange(0..<6, with: Disco.magic) }
            if i % 5 == 0, bytes.count >= 20 { bytes[0] = 0; bytes.replaceSubrange(4..<8, with: STUN.magicCookie) }
            _ = b.paths.receiveUDP(bytes, from: DiscoEndpoint("10.0.3.3:\(i + 1)")!, now: Self.at(UInt64(i)), random: &random, into: &out)
        }
        #expect(out.udp.isEmpty && out.derp.isEmpty)
        #expect(b.paths.sources.isEmpty)
        // A well-formed disco ping from a key no peer holds: dropped.
        let stranger = X25519PrivateKey.generate()
        let ping = try #require(Disco.seal(.ping(txID: Array(repeating: 1, count: 12), nodeKey: nil), privateKey: stranger, to: b.disco.publicKey))
        let result8 = b.paths.receiveUDP(ping, from: DiscoEndpoint("10.0.3.3:1")!, now: Self.at(600), random: &random, into: &out)
        #expect(result8 == .disco)
        #expect(out.udp.isEmpty && b.paths.sources.isEmpty)
        // Dropped before any key agreement; a box under the right sender key that does not
        // open is counted apart.
        #expect(b.paths.counters.discoUnknownSender >= 1)
        var forged = try #require(Disco.seal(.ping(txID: Array(repeating: 1, count: 12), nodeKey: nil), privateKey: stranger, to: b.disco.publicKey))
        forged.replaceSubrange(6..<38, with: a.disco.publicKey.bytes)
        _ = b.paths.receiveUDP(forged, from: DiscoEndpoint("10.0.3.3:2")!, now: Self.at(601), random: &random, into: &out)
        #expect(b.paths.counters.discoCannotOpen == 1 && out.udp.isEmpty)
    }

    @Test func aNewDiscoKeyStartsThePathOver() {
        var (a, b, random) = Self.pair()
        var out = DirectOutput()
        _ = a.paths.route(to: b.key, now: Self.at(10), random: &random, into: &out)
        let pong = Self.deliver(out, from: a, to: &b, now: Self.at(11), random: &random)
        _ = Self.deliver(pong, from: b, to: &a, now: Self.at(12), random: &random)
        #expect(a.paths.peers[b.key]?.path.best != nil)
        a.paths.upsertPeer(b.key, disco: X25519PrivateKey.generate().publicKey, homeRegion: 1, endpoints: [b.endpoint], now: Self.at(13), random: &random, into: &out)
        #expect(a.paths.peers[b.key]?.path.best == nil)
        #expect(a.paths.sources.isEmpty)
    }
}

extension DiscoMessage {
    var txID: [UInt8]? {
        switch self {
        case .ping(let txID, _), .pong(let txID, _, _): txID
        case .callMeMaybe: nil
        }
    }
}

/// The fuzz target's invariants, run on a fixed scenario and on random runs (bounded).
@Suite struct DirectPathsFuzzingTests {
    @Test func aVerifiedPingLetsWireGuardInAndTheInvariantsHold() {
        let ping: [UInt8] = [1, 1] + Array(0..<12)
        let wireGuard: [UInt8] = [4, 0, 0, 0] + Array(repeating: 0, count: 28)
        #expect(
            DirectPathsFuzzing.run([
                .endpoints([0x0A05]), .send,
                .udp(bytes: wireGuard, host: 2, port: 5000, seal: false),
                .udp(bytes: ping, host: 2, port: 5000, seal: true),
                .udp(bytes: wireGuard, host: 2, port: 5000, seal: false),
                .wait(milliseconds: 3000), .send, .block(true), .send, .block(false), .wait(milliseconds: 60000),
            ]) == nil)
    }

    @Test func randomRunsKeepTheInvariants() {
        var random = SplitMix64(seed: 7)
        func byte() -> UInt8 { UInt8(truncatingIfNeeded: random.next()) }
        for _ in 0..<300 {
            var steps: [DirectPathsFuzzing.Step] = []
            for _ in 0..<Int(random.next() % 40) {
                switch random.next() % 6 {
                case 0:
                    let kind = random.next() % 3
                    let bytes: [UInt8] =
                        kind == 0
                        ? [1, 1] + (0..<12).map { _ in byte() }
                        : kind == 1 ? [2, 1] + (0..<30).map { _ in byte() } : (0..<Int(random.next() % 64)).map { _ in byte() }
                    steps.append(.udp(bytes: bytes, host: byte() % 4, port: UInt16(random.next() % 4), seal: random.next() % 2 == 0))
                case 1: steps.append(.derp(bytes: [3, 0] + (0..<18 * Int(random.next() % 3)).map { _ in byte() }, seal: true))
                case 2: steps.append(.send)
                case 3: steps.append(.wait(milliseconds: UInt16(random.next() % 10_000)))
                case 4: steps.append(.block(random.next() % 4 == 0))
                default: steps.append(.endpoints((0..<Int(random.next() % 4)).map { _ in UInt16(random.next() % 8) }))
                }
            }
            let broken = DirectPathsFuzzing.run(steps)
            #expect(broken == nil, "\(steps)")
            if broken != nil { return }
        }
    }
}
