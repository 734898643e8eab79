import DERP
import WireGuard

/// The direct-path logic for the fuzz targets (`Fuzz/`, `make fuzz`): one known peer with
/// fixed keys, so inputs can carry disco that opens, and a run of steps whose invariants are
/// checked here: WireGuard is passed up only from a source a disco message of the peer came
/// from; every table stays within its bound; every datagram sent is a well-formed disco or
/// STUN message addressed to a source seen or a candidate. It exists for the fuzz targets
/// only (TailnetTests also runs its invariants on fixed and random runs).
public enum DirectPathsFuzzing {
    public static let agentDisco = X25519PrivateKey(Array(repeating: 0x31, count: 32))!
    public static let peerDisco = X25519PrivateKey(Array(repeating: 0x32, count: 32))!
    static let agentNode = X25519PrivateKey(Array(repeating: 0x33, count: 32))!.publicKey
    static let peerNode = WireGuardPublicKey(bytes: X25519PrivateKey(Array(repeating: 0x34, count: 32))!.publicKey.bytes)!

    /// One event of a run.
    public enum Step: Sendable {
        /// A datagram from `10.0.0.<host>:<port>` over UDP (sealed by the peer's disco key when asked).
        case udp(bytes: [UInt8], host: UInt8, port: UInt16, seal: Bool)
        /// A disco packet over DERP from the peer's node key.
        case derp(bytes: [UInt8], seal: Bool)
        /// A WireGuard send to the peer.
        case send
        /// Time passes, then the timers run.
        case wait(milliseconds: UInt16)
        /// The block switch.
        case block(Bool)
        /// The peer's Node lists these endpoints.
        case endpoints([UInt16])
    }

    /// Runs the steps; the first broken invariant, or nil.
    public static func run(_ steps: [Step]) -> String? {
        var paths = DirectPaths(discoKey: agentDisco, nodeKey: agentNode)
        paths.localAddresses = { [DiscoEndpoint("10.0.0.1:0")!] }
        paths.setPorts(v4: 41641, v6: nil, fixed: nil)
        var random = FuzzRandom(state: 1)
        var now = WireGuardInstant.zero
        var out = DirectOutput()
        paths.upsertPeer(peerNode, disco: peerDisco.publicKey, homeRegion: 1, endpoints: [], now: now, random: &random, into: &out)
        var discoSources = Set<DiscoEndpoint>()
        var addressed = Set<DiscoEndpoint>()
        for step in steps {
            out = DirectOutput()
            switch step {
            case .udp(let bytes, let host, let port, let seal):
                let source = DiscoEndpoint.ipv4Mapped(10, 0, 0, host, port: port)
                addressed.insert(source)
                var datagram = bytes
                if seal, let message = try? DiscoMessage(decoding: bytes),
                    let sealed = Disco.seal(message, privateKey: peerDisco, to: agentDisco.publicKey)
                {
                    datagram = sealed
                    discoSources.insert(source)
                }
                let verdict = paths.receiveUDP(datagram, from: source, now: now, random: &random, into: &out)
                if case .wireGuard = verdict, !discoSources.contains(source) {
                    return "WireGuard accepted from \(source), which sent no disco of the peer"
                }
            case .derp(let bytes, let seal):
                var packet = bytes
                if seal, let message = try? DiscoMessage(decoding: bytes),
                    let sealed = Disco.seal(message, privateKey: peerDisco, to: agentDisco.publicKey)
                {
                    packet = sealed
                }
                if case .callMeMaybe(let list) = try? DiscoMessage(decoding: bytes) { addressed.formUnion(list) }
                _ = paths.receiveDERPDisco(packet, from: peerNode, region: 1, now: now, random: &random, into: &out)
            case .send:
                _ = paths.route(to: peerNode, now: now, random: &random, into: &out)
            case .wait(let milliseconds):
                now = now.adding(nanoseconds: UInt64(milliseconds) * 1_000_000)
                paths.tick(now: now, random: &random, into: &out)
            case .block(let value):
                paths.setBlocked(value, now: now, random: &random, into: &out)
            case .endpoints(let ports):
                let list = ports.map { DiscoEndpoint.ipv4Mapped(10, 0, 1, UInt8(truncatingIfNeeded: $0 >> 8), port: $0) }
                addressed.formUnion(list)
                paths.upsertPeer(peerNode, disco: peerDisco.publicKey, homeRegion: 1, endpoints: list, now: now, random: &random, into: &out)
            }
            if paths.sources.count > DirectPaths.maxSources { return "\(paths.sources.count) sources" }
            for peer in paths.peers.values {
                if peer.path.candidates.count > PeerPath.maxCandidates { return "\(peer.path.candidates.count) candidates" }
                if peer.path.outstanding.count > PeerPath.maxOutstanding { return "\(peer.path.outstanding.count) pings in flight" }
            }
            for datagram in out.udp {
                if STUN.looksLikeSTUN(datagram.bytes) { continue }
                guard let opened = try? Disco.open(datagram.bytes, privateKey: peerDisco) else { return "a datagram that is neither STUN nor disco for the peer" }
                if case .callMeMaybe = opened.message { return "a CallMeMaybe over UDP" }
                guard addressed.contains(datagram.to) else { return "a datagram to \(datagram.to), never seen or listed" }
            }
            if paths.blocked, out.udp.contains(where: { !STUN.looksLikeSTUN($0.bytes) }) { return "disco over UDP while blocked" }
        }
        return nil
    }
}

/// SplitMix64: the run's deterministic randomness.
struct FuzzRandom: RandomNumberGenerator {
    var state: UInt64

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
