import FoundationEssentials

/// The two sealed JSON messages of DERP's handshake: ClientInfo (ours) and ServerInfo
/// (the server's), NaCl boxes between the two parties' keys.
public enum DERPHandshake {
    /// What we tell the server, byte for byte what the Go client sends (`meshKey` and
    /// `IsProber` omitted).
    public static let clientInfoJSON = #"{"version":2,"CanAckPings":true}"#

    /// What the server says about itself (unknown fields are ignored).
    public struct ServerInfo: Equatable, Sendable, Decodable {
        /// The protocol version (2).
        public var version: Int?
        /// Rate limit the server applies to us; 0 or absent means none.
        public var tokenBucketBytesPerSecond: Int?
        /// The rate limit's burst; 0 or absent means none.
        public var tokenBucketBytesBurst: Int?

        /// A server info (for servers and tests).
        public init(version: Int? = 2, tokenBucketBytesPerSecond: Int? = nil, tokenBucketBytesBurst: Int? = nil) {
            self.version = version
            self.tokenBucketBytesPerSecond = tokenBucketBytesPerSecond
            self.tokenBucketBytesBurst = tokenBucketBytesBurst
        }

        enum CodingKeys: String, CodingKey {
            case version
            case tokenBucketBytesPerSecond = "TokenBucketBytesPerSecond"
            case tokenBucketBytesBurst = "TokenBucketBytesBurst"
        }
    }

    /// What a client said about itself (for servers; unknown fields are ignored).
    public struct ClientInfo: Equatable, Sendable, Decodable {
        /// The protocol version the client speaks.
        public var version: Int?
        /// The client answers the server's Pings.
        public var canAckPings: Bool?
        /// Mesh peers only.
        public var meshKey: String?
        /// A prober (not a real client).
        public var isProber: Bool?

        enum CodingKeys: String, CodingKey {
            case version
            case canAckPings = "CanAckPings"
            case meshKey
            case isProber = "IsProber"
        }
    }

    /// Our ClientInfo frame: our public key, a fresh nonce, and the JSON sealed from our
    /// key to the server's. Its payload is 104 bytes.
    public static func clientInfo(privateKey: X25519PrivateKey, serverKey: X25519PublicKey) -> DERPFrame? {
        let nonce = NaClBox.randomNonce()
        guard let sealed = NaClBox.seal(Array(clientInfoJSON.utf8), nonce: nonce, to: serverKey, from: privateKey) else { return nil }
        return .clientInfo(key: privateKey.publicKey, nonce: nonce, sealed: sealed)
    }

    /// Opens and parses a ServerInfo sealed from `serverKey` to us.
    public static func openServerInfo(
        nonce: [UInt8], sealed: [UInt8], privateKey: X25519PrivateKey, serverKey: X25519PublicKey
    ) throws(DERPWireError) -> ServerInfo {
        guard let plain = NaClBox.open(sealed, nonce: nonce, from: serverKey, to: privateKey) else {
            throw .malformed(type: DERPFrameType.serverInfo, reason: "the box does not open")
        }
        guard let info = try? JSONDecoder().decode(ServerInfo.self, from: Data(plain)) else {
            throw .malformed(type: DERPFrameType.serverInfo, reason: "not the expected JSON")
        }
        return info
    }

    /// For servers: the ServerInfo frame sealed to `clientKey`.
    public static func serverInfo(json: String = #"{"version":2}"#, privateKey: X25519PrivateKey, clientKey: X25519PublicKey) -> DERPFrame? {
        let nonce = NaClBox.randomNonce()
        guard let sealed = NaClBox.seal(Array(json.utf8), nonce: nonce, to: clientKey, from: privateKey) else { return nil }
        return .serverInfo(nonce: nonce, sealed: sealed)
    }

    /// For servers: the JSON text of a client's ClientInfo, opened with the server's key;
    /// nil when the box does not open.
    public static func openClientInfo(nonce: [UInt8], sealed: [UInt8], clientKey: X25519PublicKey, serverPrivateKey: X25519PrivateKey) -> [UInt8]? {
        NaClBox.open(sealed, nonce: nonce, from: clientKey, to: serverPrivateKey)
    }
}
