import DERP
import WireGuard

/// What one step of ``DirectPaths`` asks its owner to do, collected so the owner does it
/// after releasing its lock.
struct DirectOutput: Sendable {
    /// Datagrams for the UDP socket (disco, STUN).
    var udp: [(to: DiscoEndpoint, bytes: [UInt8])] = []
    /// Disco for a peer over DERP (CallMeMaybe, Pongs to DERP pings).
    var derp: [(peer: WireGuardPublicKey, bytes: [UInt8])] = []
    /// The endpoint list changed: publish it in the Node.
    var publish: [DiscoEndpoint]?
}
