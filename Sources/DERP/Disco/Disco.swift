/// Disco messages carried over DERP: `TS💬` ‖ sender disco key (32) ‖
/// nonce (24) ‖ NaCl box (sender → recipient disco keys) of a ``DiscoMessage``.
public enum Disco {
    /// `TS💬`.
    public static let magic: [UInt8] = [0x54, 0x53, 0xF0, 0x9F, 0x92, 0xAC]
    /// Magic, sender key and nonce.
    public static let headerLength = 6 + 32 + 24
    /// The DERP magic address magicsock answers from: 127.3.3.40, port = the region ID.
    public static let derpMagicIPv4: [UInt8] = [127, 3, 3, 40]

    /// A message opened: who sent it and what it says.
    public struct Received: Equatable, Sendable {
        /// The sender's disco key (answer to it).
        public var sender: X25519PublicKey
        /// What it said.
        public var message: DiscoMessage
    }

    /// True when `packet` starts with the magic and holds the whole header (a WireGuard
    /// packet never does: its first byte is 1–4).
    public static func looksLikeDisco(_ packet: some Collection<UInt8>) -> Bool {
        packet.count >= headerLength && packet.starts(with: magic)
    }

    /// Opens a disco packet with our disco private key.
    public static func open(_ packet: some Collection<UInt8>, privateKey: X25519PrivateKey) throws(DiscoError) -> Received {
        let bytes = Array(packet)
        guard looksLikeDisco(bytes) else { throw .notDisco }
        guard let sender = X25519PublicKey(bytes[6..<38]) else { throw .notDisco }
        guard let plain = NaClBox.open(bytes[headerLength...], nonce: bytes[38..<headerLength], from: sender, to: privateKey) else {
            throw .cannotOpen
        }
        return Received(sender: sender, message: try DiscoMessage(decoding: plain))
    }

    /// The sender's disco key of a packet that looks like disco, read without opening it (so
    /// that a packet from no known peer costs no key agreement).
    public static func sender(of packet: some Collection<UInt8>) -> X25519PublicKey? {
        guard looksLikeDisco(packet) else { return nil }
        return X25519PublicKey(packet.dropFirst(6).prefix(32))
    }

    /// Opens a disco packet with the precomputed key shared with its sender (who is `sender`).
    public static func open(_ packet: some Collection<UInt8>, shared: NaClBox.SharedKey, sender: X25519PublicKey) throws(DiscoError) -> Received {
        let bytes = Array(packet)
        guard looksLikeDisco(bytes), Array(bytes[6..<38]) == sender.bytes else { throw .notDisco }
        guard let plain = shared.open(bytes[headerLength...], nonce: bytes[38..<headerLength]) else { throw .cannotOpen }
        return Received(sender: sender, message: try DiscoMessage(decoding: plain))
    }

    /// Seals `message` with the precomputed key shared with the recipient; `ours` is our
    /// disco public key (the packet's sender field).
    public static func seal(_ message: DiscoMessage, shared: NaClBox.SharedKey, ours: X25519PublicKey) -> [UInt8]? {
        let nonce = NaClBox.randomNonce()
        guard let sealed = shared.seal(message.encoded, nonce: nonce) else { return nil }
        return magic + ours.bytes + nonce + sealed
    }

    /// Seals `message` from our disco key to `recipient`'s: the packet to send.
    public static func seal(_ message: DiscoMessage, privateKey: X25519PrivateKey, to recipient: X25519PublicKey) -> [UInt8]? {
        seal(rawPlain: message.encoded, privateKey: privateKey, to: recipient)
    }

    /// Seals any plaintext as a disco packet (tests and fuzzing: messages we would not send).
    public static func seal(rawPlain: some Collection<UInt8>, privateKey: X25519PrivateKey, to recipient: X25519PublicKey) -> [UInt8]? {
        let nonce = NaClBox.randomNonce()
        guard let sealed = NaClBox.seal(rawPlain, nonce: nonce, to: recipient, from: privateKey) else { return nil }
        return magic + privateKey.publicKey.bytes + nonce + sealed
    }

    /// For a Ping received over DERP, the Pong to send back over DERP (to the sender's
    /// node key, which the caller knows from the RecvPacket): same TxID, source
    /// 127.3.3.40 (IPv4-mapped) and port = `regionID`, as magicsock answers. Nil for
    /// anything but a Ping.
    public static func pong(answering received: Received, privateKey: X25519PrivateKey, regionID: Int) -> [UInt8]? {
        guard case .ping(let txID, _) = received.message else { return nil }
        let source = DiscoEndpoint.ipv4Mapped(127, 3, 3, 40, port: UInt16(truncatingIfNeeded: regionID))
        return seal(.pong(txID: txID, address: source.address, port: source.port), privateKey: privateKey, to: received.sender)
    }

    /// `discokey:` and 64 lowercase hex digits (the Node's `disco` field).
    public static func keyText(_ key: X25519PublicKey) -> String { "discokey:" + key.hex }

    /// The key of a `discokey:<64 hex>` text; nil otherwise.
    public static func key(fromText text: String) -> X25519PublicKey? {
        guard text.hasPrefix("discokey:") else { return nil }
        return X25519PublicKey(hex: text.dropFirst("discokey:".count))
    }
}
