import AgentTestSupport
import DERP
import Testing
import WireGuard
@testable import Tailnet

extension SplitMix64: RandomNumberGenerator {}

/// One peer's path state machine on a hand-driven clock: DERP only → trusted → unconfirmed →
/// trusted, heartbeats, CallMeMaybe, candidates coming and going.
@Suite struct PeerPathTests {
    static let a = DiscoEndpoint("10.0.0.2:41641")!
    static let b = DiscoEndpoint("203.0.113.9:41641")!

    static func at(_ ms: UInt64) -> WireGuardInstant { WireGuardInstant(nanoseconds: ms * 1_000_000) }

    static func pings(_ actions: [PeerPath.Action]) -> [(DiscoEndpoint, [UInt8])] {
        actions.compactMap { if case .ping(let e, let tx) = $0 { (e, tx) } else { nil } }
    }

    @Test func derpUntilAPongThenTrustedThenBothWaysThenTrustedAgain() throws {
        var random = SplitMix64(seed: 1)
        var path = PeerPath()
        // No candidates: DERP, nothing to ping.
        var (route, actions) = path.send(now: Self.at(0), random: &random)
        #expect(route == .derp && actions.isEmpty)
        path.setNodeEndpoints([Self.a])
        (route, actions) = path.send(now: Self.at(10), random: &random)
        #expect(route == .derp)
        let first = try #require(Self.pings(actions).first)
        #expect(first.0 == Self.a)
        #expect(actions.last == .callMeMaybe)
        // Within 5 s the same address is not pinged again.
        (route, actions) = path.send(now: Self.at(20), random: &random)
        #expect(route == .derp && actions.isEmpty)
        // An unknown TxID changes nothing.
        let result1 = path.pongReceived(txID: Array(repeating: 0, count: 12), now: Self.at(30))
        #expect(!result1)
        #expect(path.route(at: Self.at(30)) == .derp)
        // The pong: direct and trusted for 6.5 s.
        let result2 = path.pongReceived(txID: first.1, now: Self.at(40))
        #expect(result2)
        #expect(path.route(at: Self.at(40)) == .direct(Self.a))
        #expect(path.best?.latency == 30_000_000)
        (route, actions) = path.send(now: Self.at(6_540), random: &random)
        #expect(route == .direct(Self.a) && actions.isEmpty)
        // Trust expires: both paths, and a round (a is due again after 5 s).
        (route, actions) = path.send(now: Self.at(6_541), random: &random)
        #expect(route == .both(Self.a))
        let again = try #require(Self.pings(actions).first)
        let result3 = path.pongReceived(txID: again.1, now: Self.at(6_600))
        #expect(result3)
        #expect(path.route(at: Self.at(6_600)) == .direct(Self.a))
        #expect(path.switches == 1)
    }

    @Test func heartbeatPingsTheBestAddressAndStopsWhenIdle() throws {
        var random = SplitMix64(seed: 2)
        var path = PeerPath()
        path.setNodeEndpoints([Self.a])
        let (_, actions) = path.send(now: Self.at(0), random: &random)
        #expect(path.nextDeadline == Self.at(3_000))
        let result4 = path.pongReceived(txID: Self.pings(actions)[0].1, now: Self.at(2))
        #expect(result4)
        // Not due yet.
        #expect(path.heartbeat(now: Self.at(2_999), random: &random).isEmpty)
        let beat = path.heartbeat(now: Self.at(3_000), random: &random)
        #expect(Self.pings(beat).map(\.0) == [Self.a])
        #expect(!beat.contains(.callMeMaybe))
        // The next beat (6 s) comes before the heartbeat ping's expiry (8 s).
        #expect(path.nextDeadline == Self.at(6_000))
        path.expire(now: Self.at(8_001))
        // 45 s after the last send the heartbeat stops.
        #expect(path.heartbeat(now: Self.at(46_000), random: &random).isEmpty)
        #expect(path.heartbeatAt == nil)
        #expect(path.nextDeadline == nil)
    }

    @Test func callMeMaybePingsEveryCandidateAtOnceWithoutCallingBack() {
        var random = SplitMix64(seed: 3)
        var path = PeerPath()
        path.setNodeEndpoints([Self.a])
        _ = path.send(now: Self.at(0), random: &random)
        let actions = path.callMeMaybe([Self.b, DiscoEndpoint("[fe80::1]:5")!, DiscoEndpoint("[fd60:627a:a42b::1]:5")!], now: Self.at(100), random: &random)
        // a was pinged 100 ms ago, yet the CallMeMaybe pings it again; link-local and Coder's
        // service prefix are skipped; no CallMeMaybe back.
        #expect(Set(Self.pings(actions).map(\.0)) == [Self.a, Self.b])
        #expect(!actions.contains(.callMeMaybe))
        // An empty CallMeMaybe withdraws b.
        _ = path.callMeMaybe([], now: Self.at(200), random: &random)
        #expect(Set(path.candidates.keys) == [Self.a])
    }

    @Test func aCallMeMaybeSkipsIPv6LinkLocalAndCoderServiceAddressesOnly() {
        var random = SplitMix64(seed: 7)
        var path = PeerPath()
        let v4LinkLocal = DiscoEndpoint("169.254.10.20:41641")!
        let v6LinkLocal = DiscoEndpoint("[fe80::1]:41641")!
        let service = DiscoEndpoint("[fd60:627a:a42b::1]:41641")!
        _ = path.callMeMaybe([v4LinkLocal, v6LinkLocal, service, Self.a], now: Self.at(0), random: &random)
        #expect(Set(path.candidates.keys) == [v4LinkLocal, Self.a])
    }

    /// A pong that arrives after its address was withdrawn (an empty CallMeMaybe) does not
    /// make that address the path: it is no longer one.
    @Test func aLatePongForAWithdrawnAddressIsIgnored() {
        var random = SplitMix64(seed: 8)
        var path = PeerPath()
        let actions = path.callMeMaybe([Self.b], now: Self.at(0), random: &random)
        let ping = Self.pings(actions)
        #expect(ping.map(\.0) == [Self.b])
        _ = path.callMeMaybe([], now: Self.at(10), random: &random)
        #expect(path.candidates.isEmpty)
        let matched = path.pongReceived(txID: ping[0].1, now: Self.at(20))
        #expect(!matched)
        #expect(path.route(at: Self.at(20)) == .derp)
        #expect(path.best == nil)
    }

    @Test func removingTheBestAddressFallsBackToDERP() {
        var random = SplitMix64(seed: 4)
        var path = PeerPath()
        path.setNodeEndpoints([Self.a])
        let (_, actions) = path.send(now: Self.at(0), random: &random)
        _ = path.pongReceived(txID: Self.pings(actions)[0].1, now: Self.at(5))
        #expect(path.route(at: Self.at(5)) == .direct(Self.a))
        path.setNodeEndpoints([Self.b])
        #expect(path.route(at: Self.at(6)) == .derp)
        #expect(path.switches == 2)
    }

    @Test func pingsFromAPeerMakeCandidatesAndRepeatsAreNotAnswered() {
        var path = PeerPath()
        let tx: [UInt8] = Array(repeating: 5, count: 12)
        let result5 = path.pingReceived(from: Self.b, txID: tx, now: Self.at(0))
        #expect(result5)
        let result6 = path.pingReceived(from: Self.b, txID: tx, now: Self.at(1))
        #expect(!result6)
        #expect(path.candidates[Self.b]?.fromPing == true)
        // 45 s after its last ping the ping-learned candidate goes.
        path.expire(now: Self.at(45_002))
        #expect(path.candidates[Self.b] == nil)
    }

    @Test func betterAddressRules() {
        let privateV4 = DiscoEndpoint("10.0.0.2:1")!
        let publicV6 = DiscoEndpoint("[2001:db8::1]:1")!
        let publicV4 = DiscoEndpoint("203.0.113.1:1")!
        let loopback = DiscoEndpoint("127.0.0.1:1")!
        // Equal latency: private IPv4 (20) beats public IPv6 (10); IPv6 beats IPv4 of a kind.
        #expect(AddressScore.isBetter((privateV4, 10), than: (publicV6, 10)))
        #expect(AddressScore.isBetter((publicV6, 10), than: (publicV4, 10)))
        #expect(AddressScore.isBetter((loopback, 10), than: (privateV4, 10)))
        // Much faster wins over the bonus; 1 % faster does not replace the current one.
        #expect(AddressScore.isBetter((publicV4, 1_000), than: (privateV4, 10_000)))
        #expect(!AddressScore.isBetter((DiscoEndpoint("203.0.113.2:1")!, 990), than: (publicV4, 1_000)))
        #expect(!AddressScore.isBetter((publicV4, 5), than: (publicV4, 50)))
        #expect(AddressScore.isBetter((publicV4, 5), than: nil))
    }

    /// At 100 candidates only silent ping-learned ones are swept: pings from new addresses
    /// (a captured Ping replayed from spoofed sources) cannot push out the address in use.
    @Test func aFullCandidateTableKeepsTheAddressInUse() throws {
        var random = SplitMix64(seed: 6)
        var path = PeerPath()
        let tx = { (i: Int) -> [UInt8] in [UInt8(i & 0xff), UInt8(i >> 8)] + Array(repeating: 0, count: 10) }
        _ = path.pingReceived(from: Self.b, txID: tx(0), now: Self.at(0))
        let (_, actions) = path.send(now: Self.at(1), random: &random)
        let ping = try #require(Self.pings(actions).first { $0.0 == Self.b })
        let matched = path.pongReceived(txID: ping.1, now: Self.at(2))
        #expect(matched)
        #expect(path.route(at: Self.at(2)) == .direct(Self.b))
        for i in 1..<PeerPath.maxCandidates { _ = path.pingReceived(from: DiscoEndpoint("10.1.\(i / 250).\(i % 250 + 1):9")!, txID: tx(i), now: Self.at(3)) }
        #expect(path.candidates.count == PeerPath.maxCandidates)
        let newcomer = DiscoEndpoint("10.9.9.9:9")!
        let answered = path.pingReceived(from: newcomer, txID: tx(999), now: Self.at(4))
        #expect(answered)
        #expect(path.candidates[newcomer] == nil, "but not kept: the table is full of live candidates")
        #expect(path.candidates[Self.b] != nil && path.route(at: Self.at(4)) == .direct(Self.b))
        // Once they are all silent for 45 s, the sweep makes room.
        let later = path.pingReceived(from: newcomer, txID: tx(1000), now: Self.at(45_010))
        #expect(later)
        #expect(path.candidates[newcomer] != nil)
    }

    @Test func candidatesAndPingsAreBounded() {
        var random = SplitMix64(seed: 5)
        var path = PeerPath()
        let many = (0..<300).map { DiscoEndpoint("10.0.\($0 / 250).\($0 % 250 + 1):1")! }
        path.setNodeEndpoints(many)
        #expect(path.candidates.count == PeerPath.maxCandidates)
        for (i, endpoint) in many.enumerated() { _ = path.pingReceived(from: endpoint, txID: [UInt8(i & 0xff)] + Array(repeating: 0, count: 11), now: Self.at(0)) }
        #expect(path.candidates.count <= PeerPath.maxCandidates)
        var now: UInt64 = 0
        for _ in 0..<20 {
            now += 5_000
            _ = path.send(now: Self.at(now), random: &random)
        }
        #expect(path.outstanding.count <= PeerPath.maxOutstanding)
    }
}
