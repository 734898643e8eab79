import AgentProto

/// Picks the agent's home DERP region. The Go agent measures latency (netcheck); a DERP-only
/// agent needs only a region it is connected to with at least one node that is not STUN-only.
/// The choice here is deterministic: the embedded relay if the
/// map has one (coderd's own relay, the shortest path to it), else the lowest-numbered usable
/// region not marked `avoid`, else the lowest-numbered usable one. Never 0, never STUN-only.
public enum HomeRegion {
    public static func choose(in map: Coder_Tailnet_V2_DERPMap, current: Int64? = nil) -> Int64? {
        let usable = map.regions
            .filter { $0.key > 0 && $0.key <= Int64(Int32.max) && !dialable($0.value).isEmpty }
        // Sticky: keep the current home while it is still usable.
        if let current, usable[current] != nil { return current }
        let ids = usable.keys.sorted()
        if let embedded = ids.first(where: { usable[$0]!.embeddedRelay && !usable[$0]!.avoid }) { return embedded }
        return ids.first(where: { !usable[$0]!.avoid }) ?? ids.first
    }

    /// The region's nodes the DERP client may dial, in map order: STUN-only nodes and nodes
    /// whose `derp_port` is not a TCP port (0 = the scheme's default) are skipped.
    public static func dialable(_ region: Coder_Tailnet_V2_DERPMap.Region) -> [Coder_Tailnet_V2_DERPMap.Region.Node] {
        region.nodes.filter { !$0.stunOnly && (0...65535).contains($0.derpPort) }
    }
}
