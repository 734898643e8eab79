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

/// What became of one datagram of a ``DirectOutput``'s `udp`; the owner reports each to
/// ``DirectPaths/sendResult(_:to:outcome:)``.
enum UDPSendOutcome: Equatable, Sendable {
    /// The kernel took the whole datagram.
    case sent
    /// Not sent, yet the family can send: the kernel refused this datagram alone (EPERM from
    /// a local firewall rule, as tailscale's `TreatAsLostUDP`; or a full socket buffer, where
    /// Go's blocking write would have waited). Lost as if on the way.
    case lost
    /// Not sent: no socket of that family, no route, no IPv6, too long, ...
    case failed
}
