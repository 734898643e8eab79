import DERP
import WireGuard

/// The direct-path state as the status route and `/debug/magicsock` show it.
struct DirectStatus: Sendable {
    struct Peer: Sendable {
        /// `derp`, or the direct `ip:port` (with `trusted`).
        var path: String
        var trusted: Bool
        var latencyMilliseconds: Double?
        var candidates: [String]
    }

    var blocked: Bool
    var v4Port: UInt16?
    var v6Port: UInt16?
    var endpoints: [String]
    var report: NetcheckResult?
    var peers: [WireGuardPublicKey: Peer]
    var counters: DirectCounters

    init(_ paths: DirectPaths, now: WireGuardInstant) {
        blocked = paths.blocked
        v4Port = paths.ports.v4
        v6Port = paths.ports.v6
        endpoints = paths.published.map(\.description)
        report = paths.lastReport
        counters = paths.counters
        var peers: [WireGuardPublicKey: Peer] = [:]
        for (key, peer) in paths.peers {
            let best = peer.path.best
            peers[key] = Peer(
                path: best.map { $0.endpoint.description } ?? "derp", trusted: peer.path.isTrusted(at: now),
                latencyMilliseconds: best.map { Double($0.latency) / 1e6 },
                candidates: peer.path.candidates.keys.map(\.description).sorted())
        }
        self.peers = peers
    }
}
