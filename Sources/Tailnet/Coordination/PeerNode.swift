import AgentProto
import DERP
import WireGuard

/// A peer's Node as the agent uses it: checked and parsed once when it arrives. A Node that
/// fails a check is ignored as the Go agent ignores it (no key, a bad disco text, no home
/// region, an address that does not parse).
public struct PeerNode: Sendable, Equatable {
    /// The peer's id on the coordination stream (16 bytes, a UUID).
    public let id: [UInt8]
    /// The peer's node key = its WireGuard static key and DERP identity.
    public let nodeKey: [UInt8]
    public let discoKey: [UInt8]
    /// The peer's home DERP region, where packets for it are sent.
    public let homeRegion: Int32
    /// Its `allowed_ips`: cryptokey routing accepts only these sources from it.
    public let allowedIPs: [IPPrefix]
    /// Its `endpoints` (direct UDP candidates); texts that do not parse are skipped, at most
    /// ``maxEndpoints`` kept.
    public let endpoints: [DiscoEndpoint]

    /// Why a Node was refused, for the log and a counter.
    public enum Refusal: String, Sendable, Error {
        case badID = "peer id is not 16 bytes"
        case badKey = "node key is not np + 32 bytes"
        case badDisco = "disco key is not discokey:<64 hex>"
        case noHomeRegion = "no preferred DERP"
        case badAllowedIP = "an allowed IP does not parse"
        case tooManyAllowedIPs = "more allowed IPs than the agent keeps"
    }

    /// At most this many allowed IPs per peer are kept (a coderd or client node has 1–2).
    public static let maxAllowedIPs = 64
    /// At most this many endpoints per peer are kept (a node lists a handful).
    public static let maxEndpoints = 64

    public init(id: [UInt8], node: Coder_Tailnet_V2_Node) throws(Refusal) {
        guard id.count == 16 else { throw .badID }
        guard node.key.count == 34, Array(node.key.prefix(2)) == SelfNode.nodeKeyPrefix else { throw .badKey }
        guard let disco = SelfNode.parseDisco(node.disco) else { throw .badDisco }
        guard node.preferredDerp != 0 else { throw .noHomeRegion }
        guard node.allowedIps.count <= Self.maxAllowedIPs else { throw .tooManyAllowedIPs }
        var prefixes: [IPPrefix] = []
        for text in node.allowedIps {
            guard let prefix = IPPrefix(text) else { throw .badAllowedIP }
            prefixes.append(prefix)
        }
        self.id = id
        self.nodeKey = Array(node.key.dropFirst(2))
        self.discoKey = disco
        self.homeRegion = node.preferredDerp
        self.allowedIPs = prefixes
        self.endpoints = Array(node.endpoints.lazy.compactMap { DiscoEndpoint($0) }.prefix(Self.maxEndpoints))
    }
}
