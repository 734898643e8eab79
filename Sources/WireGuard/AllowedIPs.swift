/// Cryptokey routing: which peer owns which addresses. Single addresses (/128, /32 — the
/// tailnet's case) are found in one hash lookup; shorter prefixes by a scan, longest first.
/// Bounded by the device's peer and per-peer prefix limits.
struct AllowedIPs: Sendable {
    private var exact: [IPAddress: WireGuardPublicKey] = [:]
    /// (prefix, peer), longest prefix first.
    private var ranges: [(prefix: IPPrefix, peer: WireGuardPublicKey)] = []

    /// The peer whose allowed IPs hold `address` (longest match).
    func lookup(_ address: IPAddress) -> WireGuardPublicKey? {
        if let peer = exact[address] { return peer }
        for entry in ranges where entry.prefix.contains(address) { return entry.peer }
        return nil
    }

    /// Gives `prefixes` to `peer` (a prefix another peer held moves to this one, as in
    /// WireGuard).
    mutating func insert(_ prefixes: [IPPrefix], for peer: WireGuardPublicKey) {
        for prefix in prefixes {
            if prefix.isSingleAddress {
                exact[prefix.address] = peer
            } else {
                ranges.removeAll { $0.prefix == prefix }
                let at = ranges.firstIndex { $0.prefix.bits < prefix.bits } ?? ranges.endIndex
                ranges.insert((prefix, peer), at: at)
            }
        }
    }

    /// Removes every prefix `peer` holds.
    mutating func remove(peer: WireGuardPublicKey) {
        exact = exact.filter { $0.value != peer }
        ranges.removeAll { $0.peer == peer }
    }
}
