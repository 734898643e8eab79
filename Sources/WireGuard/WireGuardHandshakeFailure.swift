/// Why a received handshake message was refused.
public enum WireGuardHandshakeFailure: Int, CaseIterable, Sendable, CustomStringConvertible {
    /// An AEAD field did not open (wrong keys, corrupted message).
    case decryption
    /// A timestamp not newer than the last initiation from that peer.
    case replayedTimestamp
    /// An initiation within 20 ms of the last one from that peer.
    case flood
    /// A response or cookie reply for no initiation of ours in progress.
    case unexpected
    /// A key exchange with a low-order point.
    case badPoint

    /// The metric label (snake case).
    public var description: String {
        switch self {
        case .decryption: "decryption"
        case .replayedTimestamp: "replayed_timestamp"
        case .flood: "flood"
        case .unexpected: "unexpected"
        case .badPoint: "bad_point"
        }
    }
}
