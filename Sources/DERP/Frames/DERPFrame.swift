/// A DERP frame by meaning. ``init(_:)`` checks each type's minimum
/// length; ``raw`` encodes it back.
public enum DERPFrame: Equatable, Sendable {
    /// S→C greeting: the server's public key (after the 8-byte magic).
    case serverKey(X25519PublicKey)
    /// C→S: our public key, a nonce and the NaCl box of our JSON info.
    case clientInfo(key: X25519PublicKey, nonce: [UInt8], sealed: [UInt8])
    /// S→C: a nonce and the NaCl box of the server's JSON info.
    case serverInfo(nonce: [UInt8], sealed: [UInt8])
    /// C→S: a packet for the client with `destination`'s key.
    case sendPacket(destination: X25519PublicKey, packet: [UInt8])
    /// S→C: a packet from the client with `source`'s key.
    case recvPacket(source: X25519PublicKey, packet: [UInt8])
    /// S→C: nothing but liveness.
    case keepAlive
    /// C→S: whether this server is our home region.
    case notePreferred(Bool)
    /// S→C: a peer left (reason 0: it had sent to us and disconnected; 1: not here).
    case peerGone(X25519PublicKey, reason: UInt8)
    /// Either way: answer with a Pong carrying the same 8 bytes.
    case ping([UInt8])
    /// The answer to a Ping.
    case pong([UInt8])
    /// S→C: a problem text, empty when healthy.
    case health(String)
    /// S→C: the server restarts; reconnect after `reconnectIn` ms and keep trying for
    /// `tryFor` ms.
    case restarting(reconnectInMilliseconds: UInt32, tryForMilliseconds: UInt32)
    /// Any other type (mesh frames, future ones): skipped.
    case other(type: UInt8, payload: [UInt8])

    /// The frame a raw frame means; throws when it is too short for its type (a ServerKey
    /// without the magic: `invalid server greeting`).
    public init(_ raw: DERPRawFrame) throws(DERPWireError) {
        let p = raw.payload
        let keyLength = X25519PublicKey.length
        func key(_ bytes: ArraySlice<UInt8>) -> X25519PublicKey { X25519PublicKey(bytes)! }
        func short(_ what: String) -> DERPWireError { .malformed(type: raw.type, reason: "\(p.count) bytes, too short for \(what)") }
        switch raw.type {
        case DERPFrameType.serverKey:
            let magic = DERPProtocol.magic
            guard p.count >= magic.count + keyLength, p.starts(with: magic) else { throw .invalidServerGreeting }
            self = .serverKey(key(p[magic.count..<magic.count + keyLength]))
        case DERPFrameType.clientInfo:
            guard p.count >= keyLength + NaClBox.nonceLength + NaClBox.overhead else { throw short("a client info") }
            self = .clientInfo(
                key: key(p[0..<keyLength]), nonce: Array(p[keyLength..<keyLength + NaClBox.nonceLength]),
                sealed: Array(p[(keyLength + NaClBox.nonceLength)...]))
        case DERPFrameType.serverInfo:
            guard p.count >= NaClBox.nonceLength + NaClBox.overhead else { throw short("a server info") }
            self = .serverInfo(nonce: Array(p[0..<NaClBox.nonceLength]), sealed: Array(p[NaClBox.nonceLength...]))
        case DERPFrameType.sendPacket:
            guard p.count >= keyLength else { throw short("a key") }
            self = .sendPacket(destination: key(p[0..<keyLength]), packet: Array(p[keyLength...]))
        case DERPFrameType.recvPacket:
            guard p.count >= keyLength else { throw short("a key") }
            self = .recvPacket(source: key(p[0..<keyLength]), packet: Array(p[keyLength...]))
        case DERPFrameType.keepAlive:
            self = .keepAlive
        case DERPFrameType.notePreferred:
            guard let first = p.first else { throw short("a flag") }
            self = .notePreferred(first != 0)
        case DERPFrameType.peerGone:
            guard p.count >= keyLength else { throw short("a key") }
            self = .peerGone(key(p[0..<keyLength]), reason: p.count > keyLength ? p[keyLength] : 0)
        case DERPFrameType.ping, DERPFrameType.pong:
            guard p.count >= DERPProtocol.pingLength else { throw short("8 bytes of ping data") }
            let data = Array(p[0..<DERPProtocol.pingLength])
            self = raw.type == DERPFrameType.ping ? .ping(data) : .pong(data)
        case DERPFrameType.health:
            self = .health(String(decoding: p, as: UTF8.self))
        case DERPFrameType.restarting:
            guard p.count >= 8 else { throw short("two 32-bit durations") }
            func be32(_ at: Int) -> UInt32 { p[at..<at + 4].reduce(UInt32(0)) { $0 << 8 | UInt32($1) } }
            self = .restarting(reconnectInMilliseconds: be32(0), tryForMilliseconds: be32(4))
        default:
            self = .other(type: raw.type, payload: p)
        }
    }

    /// The frame's type byte and payload.
    public var raw: DERPRawFrame {
        func be32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(truncatingIfNeeded: v >> 16), UInt8(truncatingIfNeeded: v >> 8), UInt8(truncatingIfNeeded: v)] }
        switch self {
        case .serverKey(let key): return DERPRawFrame(type: DERPFrameType.serverKey, payload: DERPProtocol.magic + key.bytes)
        case .clientInfo(let key, let nonce, let sealed): return DERPRawFrame(type: DERPFrameType.clientInfo, payload: key.bytes + nonce + sealed)
        case .serverInfo(let nonce, let sealed): return DERPRawFrame(type: DERPFrameType.serverInfo, payload: nonce + sealed)
        case .sendPacket(let key, let packet): return DERPRawFrame(type: DERPFrameType.sendPacket, payload: key.bytes + packet)
        case .recvPacket(let key, let packet): return DERPRawFrame(type: DERPFrameType.recvPacket, payload: key.bytes + packet)
        case .keepAlive: return DERPRawFrame(type: DERPFrameType.keepAlive, payload: [])
        case .notePreferred(let preferred): return DERPRawFrame(type: DERPFrameType.notePreferred, payload: [preferred ? 1 : 0])
        case .peerGone(let key, let reason): return DERPRawFrame(type: DERPFrameType.peerGone, payload: key.bytes + [reason])
        case .ping(let data): return DERPRawFrame(type: DERPFrameType.ping, payload: data)
        case .pong(let data): return DERPRawFrame(type: DERPFrameType.pong, payload: data)
        case .health(let text): return DERPRawFrame(type: DERPFrameType.health, payload: Array(text.utf8))
        case .restarting(let reconnectIn, let tryFor): return DERPRawFrame(type: DERPFrameType.restarting, payload: be32(reconnectIn) + be32(tryFor))
        case .other(let type, let payload): return DERPRawFrame(type: type, payload: payload)
        }
    }

    /// The whole frame's bytes.
    public var encoded: [UInt8] { raw.encoded }
}
