/// A disco message inside its box: type byte, version byte, payload.
public enum DiscoMessage: Equatable, Sendable {
    /// Type 1: a transaction ID (12 bytes) and, optionally, the sender's node key.
    case ping(txID: [UInt8], nodeKey: X25519PublicKey?)
    /// Type 2: the transaction ID of the ping answered and the ping's source as the
    /// answerer saw it (16-byte IPv6 or IPv4-mapped address, port).
    case pong(txID: [UInt8], address: [UInt8], port: UInt16)
    /// Type 3: the sender's endpoints (16-byte address, port each).
    case callMeMaybe([DiscoEndpoint])

    public static let typePing: UInt8 = 1
    public static let typePong: UInt8 = 2
    public static let typeCallMeMaybe: UInt8 = 3
    /// Length of a transaction ID.
    public static let txIDLength = 12
    /// v1 Pings and Pongs are padded so the payload (after type and version) is this long:
    /// the largest WireGuard packet of a 1280-byte inner MTU (1310) minus the wrapper (80).
    public static let paddedPayloadLength = 1230

    /// Type, version and payload: Ping and Pong as v1, padded to
    /// ``paddedPayloadLength``; CallMeMaybe as v0, unpadded.
    public var encoded: [UInt8] {
        switch self {
        case .ping(let txID, let nodeKey):
            var payload = txID + (nodeKey?.bytes ?? [])
            payload += [UInt8](repeating: 0, count: max(0, Self.paddedPayloadLength - payload.count))
            return [Self.typePing, 1] + payload
        case .pong(let txID, let address, let port):
            var payload = txID + address + [UInt8(port >> 8), UInt8(port & 0xff)]
            payload += [UInt8](repeating: 0, count: max(0, Self.paddedPayloadLength - payload.count))
            return [Self.typePong, 1] + payload
        case .callMeMaybe(let endpoints):
            var bytes: [UInt8] = [Self.typeCallMeMaybe, 0]
            for endpoint in endpoints {
                bytes += endpoint.address
                bytes += [UInt8(endpoint.port >> 8), UInt8(endpoint.port & 0xff)]
            }
            return bytes
        }
    }

    /// Parses an opened message, as leniently as the Go parser: longer payloads are fine,
    /// a Ping's node key is read when present (all zeros: none), a CallMeMaybe whose
    /// length is not a whole number of endpoints (or not v0) has none.
    public init(decoding plain: some Collection<UInt8>) throws(DiscoError) {
        let bytes = Array(plain)
        guard bytes.count >= 2 else { throw .short }
        let version = bytes[1]
        let payload = bytes[2...]
        switch bytes[0] {
        case Self.typePing:
            guard payload.count >= Self.txIDLength else { throw .short }
            let txID = Array(payload.prefix(Self.txIDLength))
            let rest = payload.dropFirst(Self.txIDLength)
            var key: X25519PublicKey?
            if rest.count >= X25519PublicKey.length {
                let raw = rest.prefix(X25519PublicKey.length)
                if raw.contains(where: { $0 != 0 }) { key = X25519PublicKey(raw) }
            }
            self = .ping(txID: txID, nodeKey: key)
        case Self.typePong:
            guard payload.count >= Self.txIDLength + 18 else { throw .short }
            let p = Array(payload)
            self = .pong(txID: Array(p[0..<12]), address: Array(p[12..<28]), port: UInt16(p[28]) << 8 | UInt16(p[29]))
        case Self.typeCallMeMaybe:
            let p = Array(payload)
            guard version == 0, !p.isEmpty, p.count % 18 == 0 else {
                self = .callMeMaybe([])
                return
            }
            var endpoints: [DiscoEndpoint] = []
            var offset = 0
            // Bounded by the payload's length.
            while offset < p.count {
                endpoints.append(DiscoEndpoint(address: Array(p[offset..<offset + 16]), port: UInt16(p[offset + 16]) << 8 | UInt16(p[offset + 17])))
                offset += 18
            }
            self = .callMeMaybe(endpoints)
        default:
            throw .unknownType(bytes[0])
        }
    }
}
