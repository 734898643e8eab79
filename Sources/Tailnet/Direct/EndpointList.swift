import DERP
import WireGuard

/// The endpoints the agent advertises (magicsock's `determineEndpoints`), in its order with
/// duplicates dropped: STUN's IPv4 mapping, the same IP with our fixed port when the NAT
/// maps per destination, STUN's IPv6 mapping, STUN endpoints seen in the last 5 min 10 s,
/// then local addresses with the IPv4 socket's port (loopback only when nothing else).
struct EndpointList: Sendable {
    /// STUN endpoints by when they were last seen (at most ``maxTracked``).
    private(set) var tracked: [DiscoEndpoint: WireGuardInstant] = [:]
    static let maxTracked = 16

    mutating func determine(
        report: NetcheckResult?, local: [DiscoEndpoint], v4Port: UInt16?, v6Port: UInt16?, fixedPort: UInt16?,
        now: WireGuardInstant
    ) -> [DiscoEndpoint] {
        var list: [DiscoEndpoint] = []
        func add(_ endpoint: DiscoEndpoint?) {
            guard let endpoint, endpoint.port != 0, !list.contains(endpoint) else { return }
            list.append(endpoint)
        }
        var fromSTUN: [DiscoEndpoint] = []
        if let report {
            if let v4 = report.globalV4 {
                fromSTUN.append(v4)
                if report.mappingVariesByDestIP == true, let fixedPort, fixedPort != 0 {
                    fromSTUN.append(DiscoEndpoint(address: v4.address, port: fixedPort))
                }
            }
            if let v6 = report.globalV6 { fromSTUN.append(v6) }
        }
        for endpoint in fromSTUN {
            add(endpoint)
            tracked[endpoint] = now
        }
        tracked = tracked.filter { now.since($0.value) <= DirectTimers.endpointTrackerLifetime }
        if tracked.count > Self.maxTracked {
            let newest = tracked.sorted { $0.value > $1.value }.prefix(Self.maxTracked)
            tracked = Dictionary(uniqueKeysWithValues: newest.map { ($0.key, $0.value) })
        }
        for endpoint in tracked.keys.sorted(by: { $0.description < $1.description }) { add(endpoint) }
        let port = v4Port ?? v6Port ?? 0
        let usable = local.filter { !$0.isLoopback }
        for address in (usable.isEmpty && list.isEmpty ? local : usable) {
            add(DiscoEndpoint(address: address.address, port: port))
        }
        return list
    }
}
