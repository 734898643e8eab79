import AgentProto
import DERP
import FoundationEssentials
import SwiftProtobuf

/// What the agent announces about itself on the coordination stream: the Node exactly as
/// coderd's rules for agents require: `key` = `np` + the 32-byte
/// node public key, `disco` = `discokey:` + 64 lowercase hex, a non-zero `preferred_derp` of a
/// region the agent is connected to, `addresses` = `allowed_ips` = the two UUID-derived /128s,
/// `endpoints` = the direct UDP endpoints (empty while blocked), `as_of` at microsecond precision.
public struct SelfNode: Sendable, Equatable {
    public var addresses: TailnetAddresses
    public var nodeKey: [UInt8]
    public var discoKey: [UInt8]
    /// The home region; the node is not sent while it is 0.
    public var preferredDERP: Int32
    /// Region → why the DERP connection uses WebSocket (debug only; `derp_forced_websocket`).
    public var forcedWebSocket: [Int32: String]
    /// The direct endpoints (`203.0.113.7:41641`, `[2001:db8::1]:41641`).
    public var endpoints: [String] = []

    public init(
        addresses: TailnetAddresses, nodeKey: [UInt8], discoKey: [UInt8],
        preferredDERP: Int32 = 0, forcedWebSocket: [Int32: String] = [:]
    ) {
        self.addresses = addresses
        self.nodeKey = nodeKey
        self.discoKey = discoKey
        self.preferredDERP = preferredDERP
        self.forcedWebSocket = forcedWebSocket
    }

    /// Whether coderd would accept and peers would use the node (a home region is known).
    public var isSendable: Bool { preferredDERP != 0 && nodeKey.count == 32 && discoKey.count == 32 }

    /// The wire Node, stamped with `asOf` (seconds and nanoseconds since 1970, cut to µs).
    public func message(asOf: (seconds: Int64, nanos: Int32)) -> Coder_Tailnet_V2_Node {
        var node = Coder_Tailnet_V2_Node()
        node.id = addresses.nodeID
        node.asOf = Google_Protobuf_Timestamp(seconds: asOf.seconds, nanos: asOf.nanos / 1000 * 1000)
        node.key = Data(Self.nodeKeyPrefix + nodeKey)
        node.disco = Self.discoText(discoKey)
        node.preferredDerp = preferredDERP
        node.derpForcedWebsocket = forcedWebSocket
        node.addresses = addresses.prefixes
        node.allowedIps = addresses.prefixes
        node.endpoints = endpoints
        return node
    }

    /// `np`: the prefix of a node key in the Node's `key` bytes (Tailscale's binary key form).
    public static let nodeKeyPrefix: [UInt8] = Array("np".utf8)

    /// `discokey:<64 lowercase hex>`.
    public static func discoText(_ key: [UInt8]) -> String {
        X25519PublicKey(key).map(Disco.keyText) ?? ""
    }

    /// Lowercase hex (the status route's `nodekey:` text).
    static func hex(_ bytes: [UInt8]) -> String {
        X25519PublicKey(bytes)?.hex ?? ""
    }

    /// The 32 bytes of `discokey:<hex>`, or nil.
    public static func parseDisco(_ text: String) -> [UInt8]? {
        Disco.key(fromText: text)?.bytes
    }
}
